"""The binlog stream's MySQL packets read off the socket in large blocks instead of two reads per packet.

PyMySQL reads every packet as a 4-byte header and then its payload, each through its buffered socket file
(an 8 KiB buffer), and wraps the payload in a MysqlPacket: at binlog rates that is tens of thousands of
reads a second (issue 28: a fifth of tail's CPU with the library's event construction). Once the dump has
started, this reader takes the stream connection's bytes in blocks of up to 256 KiB and cuts them into the
same MysqlPacket objects, with PyMySQL's own checks: the sequence number, payloads of 16 MiB and more
split over several packets, an error packet raised as PyMySQL raises it, and a lost or timed-out socket
as its OperationalError 2013 (cdc.source.binlog maps it to a reconnect at the last commit).
"""

from __future__ import annotations

import errno
from typing import Any

from pymysql import err
from pymysql.constants import CR
from pymysql.protocol import MysqlPacket

BLOCK = 256 * 1024
_MAX_PACKET = 0xFFFFFF  # a payload this long continues in the next packet (PyMySQL's MAX_PACKET_LEN)


class BlockPackets:
    """Read one connection's packets from a block buffer; install() replaces its `_read_packet`."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.buf = b""
        self.at = 0
        self.blocks = 0  # reads of the socket (for tests and profiles)

    def install(self) -> None:
        self.conn._read_packet = self.read_packet

    def has_packet(self) -> bool:
        """Whether a whole packet waits in the buffer (read from the socket, not handed out yet)."""
        buf, at = self.buf, self.at
        return len(buf) - at >= 4 and at + 4 + (buf[at] | buf[at + 1] << 8 | buf[at + 2] << 16) <= len(buf)

    def read_packet(self, packet_type: type = MysqlPacket) -> Any:
        """The next packet, as the connection's own _read_packet returns it."""
        buf, at = self.buf, self.at
        if len(buf) - at >= 4:
            length = buf[at] | buf[at + 1] << 8 | buf[at + 2] << 16
            end = at + 4 + length
            if end <= len(buf) and length < _MAX_PACKET:
                self._check_sequence(buf[at + 3])
                self.at = end
                return self._finish(packet_type(buf[at + 4:end], self.conn.encoding))
        return self._finish(packet_type(self._read_split(), self.conn.encoding))

    def _read_split(self) -> bytes:
        """A payload whose packet is not whole in the buffer, or that runs over several packets."""
        parts = []
        while True:
            length = int.from_bytes(self._take(4, whole=False), "little")
            header_seq, length = length >> 24, length & _MAX_PACKET
            self._check_sequence(header_seq)
            parts.append(self._take(length, whole=True))
            if length < _MAX_PACKET:
                return b"".join(parts)

    def _take(self, size: int, whole: bool) -> bytes:
        """`size` bytes from the buffer, reading the socket for what is missing."""
        while len(self.buf) - self.at < size:
            missing = size - (len(self.buf) - self.at)
            # A big event is read in one piece once its size is known; small ones fill the buffer block by block.
            self._fill(missing if whole and missing > BLOCK else BLOCK, exact=whole and missing > BLOCK)
        data = self.buf[self.at:self.at + size]
        self.at += size
        return data

    def _fill(self, size: int, exact: bool) -> None:
        conn = self.conn
        if conn._current_timeout != conn._read_timeout:  # as PyMySQL: the read timeout holds for every read
            conn._sock.settimeout(conn._read_timeout)
            conn._current_timeout = conn._read_timeout
        while True:
            try:
                chunk = conn._rfile.read(size) if exact else conn._rfile.read1(size)
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                conn._force_close()
                raise err.OperationalError(CR.CR_SERVER_LOST, f"Lost connection to MySQL server during query ({exc})") from exc
            except BaseException:
                conn._force_close()
                raise
        if not chunk or (exact and len(chunk) < size):
            conn._force_close()
            raise err.OperationalError(CR.CR_SERVER_LOST, "Lost connection to MySQL server during query")
        self.blocks += 1
        self.buf = self.buf[self.at:] + chunk
        self.at = 0

    def _check_sequence(self, seq: int) -> None:
        conn = self.conn
        if seq != conn._next_seq_id:
            conn._force_close()
            if seq == 0:  # MariaDB sends its error packet with sequence 0 when it shuts down
                raise err.OperationalError(CR.CR_SERVER_LOST, "Lost connection to MySQL server during query")
            raise err.InternalError(f"Packet sequence number wrong - got {seq} expected {conn._next_seq_id}")
        conn._next_seq_id = (seq + 1) % 256

    def _finish(self, packet: Any) -> Any:
        if packet.is_error_packet():
            result = self.conn._result
            if result is not None and result.unbuffered_active is True:
                result.unbuffered_active = False
            packet.raise_for_error()
        return packet
