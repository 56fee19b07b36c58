"""Read one SELECT's row packets off a PyMySQL connection in blocks and hand them to a compiled reader.

PyMySQL reads a result one packet at a time (a header read, a payload read, a packet object, a
converter per value): at snapshot rates that machinery alone cost more than mariadb-dump's whole run.
Here PyMySQL sends the query and reads the column definitions as usual (so errors, TLS, timeouts and
character sets stay its business); the row packets are then read from its socket buffer in blocks of
BLOCK bytes and parsed by cdc.snapshot.lines' generated code. The unbuffered result keeps
memory bounded: at most one block (or one row, if bigger) is held. Before each read that would wait for
the server, `on_idle` may do other work (the snapshot writes its queued lines then) for as long as no
bytes are waiting on the socket.

This uses PyMySQL internals that have been stable through 1.x (`_rfile`, `_next_seq_id`,
`_force_close`, `_execute_command`, `_read_packet`, the cursor's `_result` with `fields`, `converters`,
`unbuffered_active`);
check_driver() refuses a PyMySQL without them with a clear message instead of misreading a stream.
"""

from __future__ import annotations

import select
from collections.abc import Callable, Sequence
from typing import Any

import pymysql
import pymysql.cursors
from pymysql.constants import CR
from pymysql.protocol import MysqlPacket

from cdc.errors import PreconditionError
from cdc.snapshot import binary
from cdc.snapshot import native as native_api
from cdc.snapshot.lines import CompiledTable

BLOCK = 256 * 1024
MAX_PACKET = 0xFFFFFF  # a payload this long continues in the next packet (rows of 16 MiB and more)

# (row number of the first line, number of lines, bytes objects holding them whole: one per line or per block)
Sink = Callable[[int, int, list[bytes]], None]
CompileFn = Callable[[Sequence[Any], Sequence[tuple[str | None, Any]]], CompiledTable]
IdleFn = Callable[[Callable[[], bool]], None]  # gets a "nothing to read yet" check; works while it says True
ParseFn = Callable[..., tuple[int, int, int]]  # CompiledTable.parse's signature


def check_driver(conn: pymysql.Connection) -> None:
    """Refuse a PyMySQL whose internals differ from what the block reader relies on."""
    missing = [name for name in ("_sock", "_rfile", "_next_seq_id", "_force_close", "_result", "_execute_command",
                                 "_read_packet") if not hasattr(conn, name)]
    if missing:
        raise PreconditionError(
            f"PyMySQL {pymysql.__version__} lacks {', '.join(missing)}, which the snapshot's row reader uses",
            hint="install a PyMySQL 1.x release (pip install 'PyMySQL>=1.2,<2')",
        )


def read_rows(conn: pymysql.Connection, sql: str, params: Sequence[Any] | None, compiled_for: CompileFn,
              first_row: int, sink: Sink, on_idle: IdleFn | None = None, *,
              binary_rows: bool | None = None) -> tuple[int, bytes | None]:
    """Run the SELECT, feed its lines to `sink` in batches; return (rows read, the last line or None).

    If anything fails mid-result, the rest of the result is still on the wire: the connection is
    closed rather than left out of step with the server. With the C reader (`binary_rows` None) or
    `binary_rows` True, the rows come over the binary protocol (a prepared statement: the server prints
    no value, cdc.snapshot.binary); else, or where the server will not prepare the statement, over the
    text protocol.
    """
    if binary_rows or (binary_rows is None and native_api.native_module() is not None):
        done = _read_binary(conn, sql, params, compiled_for, first_row, sink, on_idle)
        if done is not None:
            return done
    with conn.cursor(pymysql.cursors.SSCursor) as cursor:
        cursor.execute(sql, params)
        result = cursor._result  # noqa: SLF001 - see the module docstring
        if result is None or not result.unbuffered_active:
            return 0, None  # not a result set (never for a SELECT)
        wire = _Wire(conn, compiled_for(result.fields, result.converters), on_idle)
        try:
            return wire.run(first_row, sink)
        except BaseException:
            if not wire.finished:
                conn._force_close()  # noqa: SLF001
            raise
        finally:
            result.unbuffered_active = False  # read to its end here, or abandoned with the connection


def _read_binary(conn: pymysql.Connection, sql: str, params: Sequence[Any] | None, compiled_for: CompileFn,
                 first_row: int, sink: Sink, on_idle: IdleFn | None) -> tuple[int, bytes | None] | None:
    """read_rows over the binary protocol; None (nothing read) where the server refuses to prepare the
    statement or a column's type is one binary.to_text does not know."""
    with conn.cursor() as cursor:
        text = cursor.mogrify(sql, params)  # the statement the text protocol would run, values bound the same way
    try:
        statement = binary.prepare(conn, text)
    except pymysql.err.MySQLError as exc:
        # The server (or a proxy) answered with an error: max_prepared_stmt_count reached, prepared statements
        # not supported, or what the text protocol will meet too and report. A client error (2000 and up: the
        # connection lost) is raised.
        if exc.args and isinstance(exc.args[0], int) and exc.args[0] < 2000:
            return None
        raise
    if not binary.readable(statement.types):
        binary.close(conn, statement)
        return None
    result = binary.execute(conn, statement)
    table = compiled_for(result.fields, result.converters)
    types = [binary.WireType.of(field) for field in result.fields]
    if table.reader is not None:
        table.reader.set_binary(tuple((t.code, int(t.unsigned), t.decimals, t.zerofill, plain)
                                      for t, plain in zip(types, table.plain_doubles, strict=True)), table.checked_row)
        wire = _Wire(conn, table, on_idle, table.reader.parse_binary, table.reader.to_text)
    else:  # a table compiled for the Python reader: the reference conversion, row by row
        wire = _Wire(conn, table, on_idle, binary.python_parse(table.checked_row, types),
                     lambda payload: binary.to_text(payload, types))
    try:
        done = wire.run(first_row, sink)
    except BaseException:
        if not wire.finished:
            conn._force_close()  # noqa: SLF001
        else:  # an ERR packet ended the result: the connection goes on, without the statement
            binary.close(conn, statement)
        raise
    binary.close(conn, statement)
    return done


def last_line(block: bytes) -> bytes:
    """The last of the whole lines in `block` (the C reader appends one block of lines per call)."""
    return block[block.rfind(b"\n", 0, len(block) - 1) + 1:]


class _Wire:
    """The byte buffer between the socket and the generated parser."""

    def __init__(self, conn: pymysql.Connection, table: CompiledTable, on_idle: IdleFn | None = None,
                 parse: ParseFn | None = None, to_text: Callable[[bytes], bytes] | None = None) -> None:
        self.conn = conn
        self.table = table
        self.on_idle = on_idle
        # The binary protocol's rows: parsed by parse_binary, a row of 16 MiB or more made text for row().
        self.parse = parse or table.parse
        self.to_text = to_text
        self._poll = select.poll()  # not select.select: it fails on descriptors past 1023
        self._poll.register(conn._sock.fileno(), select.POLLIN)  # noqa: SLF001
        self.rfile = conn._rfile  # noqa: SLF001
        self.seq = conn._next_seq_id  # noqa: SLF001
        self.buf = b""
        self.p = 0
        self.finished = False

    def run(self, n: int, sink: Sink) -> tuple[int, bytes | None]:
        first, last = n, None
        parse = self.parse
        while True:
            out: list[bytes] = []
            batch_start = n
            try:
                self.p, n, self.seq = parse(self.buf, self.p, len(self.buf), n, self.seq, out)
            except ValueError as exc:  # values' errors come as RowEncodeError: this is a binary row not read
                if self.to_text is None:
                    raise
                raise self._lost(f"a binary row not read: {exc}") from exc
            if out:
                sink(batch_start, n - batch_start, out)
                last = last_line(out[-1])
            stop = self._stopped_at()
            if stop == "eof":
                return n - first, last
            if stop == "big":
                line = self._big_row(self._big_payload(), n)
                sink(n, 1, [line])
                n, last = n + 1, line
            # "more": the packet at p is incomplete; _stopped_at read the bytes it needs

    def _big_row(self, payload: bytes, n: int) -> bytes:
        if self.to_text is None:
            return self.table.row(payload, n)
        try:
            text = self.to_text(payload)
        except ValueError as exc:
            raise self._lost(f"a binary row not read: {exc}") from exc
        return self.table.checked_row(text, n)

    def _stopped_at(self) -> str:
        """Why parse stopped at p: "eof", "big" (a multi-packet row), or "more" once more bytes are in."""
        buf, p = self.buf, self.p
        if len(buf) - p >= 4:
            size = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
            if buf[p + 3] != self.seq:
                raise self._lost(f"packet sequence number wrong: got {buf[p + 3]}, expected {self.seq}")
            if size == MAX_PACKET:
                return "big"
            end = p + 4 + size
            if end <= len(buf):
                return self._end_packet(buf[p + 4:end], end)
            self._fill(end - len(buf))
        else:
            self._fill(4 - (len(buf) - p))
        return "more"

    def _end_packet(self, payload: bytes, end: int) -> str:
        """A complete packet parse did not take: the result's EOF, an ERR, or a protocol error."""
        self.seq = (self.seq + 1) & 255
        self.conn._next_seq_id = self.seq  # noqa: SLF001
        if payload[:1] == b"\xfe" and len(payload) < 9:
            if end != len(self.buf):
                raise self._lost(f"{len(self.buf) - end} bytes after the end of the result")
            self.finished = True
            return "eof"
        self.finished = True  # an ERR packet ends the result too: the connection stays usable
        if payload[:1] == b"\xff":
            MysqlPacket(payload, self.conn.encoding).raise_for_error()
        self.finished = False
        raise self._lost(f"unexpected packet 0x{payload[:1].hex()} in a result set")

    def _big_payload(self) -> bytes:
        """Join a row split over packets of MAX_PACKET bytes (and a last, shorter one)."""
        parts = []
        while True:
            header = self._take(4)
            size = header[0] | header[1] << 8 | header[2] << 16
            if header[3] != self.seq:
                raise self._lost(f"packet sequence number wrong: got {header[3]}, expected {self.seq}")
            self.seq = (self.seq + 1) & 255
            parts.append(self._take(size))
            if size < MAX_PACKET:
                return b"".join(parts)

    def _take(self, count: int) -> bytes:
        while len(self.buf) - self.p < count:
            self._fill(count - (len(self.buf) - self.p))
        data = self.buf[self.p:self.p + count]
        self.p += count
        return data

    def _fill(self, need: int) -> None:
        """Append at least `need` bytes to the buffer (one block, or exactly what a big packet lacks)."""
        if self.on_idle is not None:
            self.on_idle(self._nothing_to_read)
        try:
            data = self.rfile.read1(BLOCK) if need <= BLOCK else self.rfile.read(need)
        except OSError as exc:
            raise self._lost(str(exc)) from exc
        if not data:
            raise self._lost("the server closed the connection")
        self.buf = self.buf[self.p:] + data
        self.p = 0

    def _nothing_to_read(self) -> bool:
        """True while no bytes wait on the socket (an error or a closed socket counts as something to read).

        Bytes already in PyMySQL's read buffer (or TLS's) are not seen: the queued jobs then run before they
        are parsed, which delays them and loses nothing.
        """
        return not self._poll.poll(0)

    def _lost(self, why: str) -> pymysql.err.OperationalError:
        self.conn._force_close()  # noqa: SLF001 - the stream is out of step: never reuse it
        return pymysql.err.OperationalError(CR.CR_SERVER_LOST, f"Lost connection to MySQL server during query ({why})")
