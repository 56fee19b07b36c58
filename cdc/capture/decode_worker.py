"""A decode worker process: rows-event bodies in, blocks of change lines out (cdc.capture.decode_pool).

Started by tail as `python -c ...main()`, it talks over its stdin and stdout in frames (an 8-byte length, then
a pickle) and keeps no state but the table decoders tail sends it. Messages in:
  ("define", key, columns, schema, exclude, hashed, hash_key)  a table map's decoder (cdc.rows.decode.RowDecoder)
  ("forget", key)                                     that decoder is no longer used
  ("rows", key, body, meta)                           a full-image rows-event body and its RowsMeta
and one reply per "rows", in order, not pickled (the blocks are most of the bytes and are used as they arrive):
REPLY header (size of what follows, kind, line count) then the lines: kind b"o" with a block of lines, b"s"
when the fast path cannot encode a value (tail then decodes that event itself through the library, which
names the column), b"e" with a traceback for a bug.
It ignores SIGINT and SIGTERM: a Ctrl-C or a stop of the whole process group reaches tail, which drains the
worker's results before it seals and checkpoints; the worker ends when tail closes its stdin or dies.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import traceback
from typing import Any, BinaryIO

HEADER = struct.Struct("<Q")
REPLY = struct.Struct("<QcQ")  # size of the data after this header, kind, number of lines


def frame(message: Any) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    if len(data) < size:
        return None  # end of input: tail closed the pipe or died
    return data


def read_frame(stream: BinaryIO) -> Any:
    header = _read_exactly(stream, HEADER.size)
    if header is None:
        return None
    payload = _read_exactly(stream, HEADER.unpack(header)[0])
    return None if payload is None else pickle.loads(payload)


def main() -> None:
    """Serve decode requests until stdin ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed by accident goes to stderr, never between the frames
    requests = os.fdopen(0, "rb", buffering=2**20)  # bodies of several events per read
    try:
        _serve(requests, replies)
    except BrokenPipeError:  # tail is gone: nobody is left to answer
        pass


def _serve(requests: BinaryIO, replies: BinaryIO) -> None:
    from cdc.capture.nativeblock import native_block
    from cdc.capture.rowblock import rows_block
    from cdc.rows.decode import FAST_PATH_ERRORS, RowDecoder

    decoders: dict[int, RowDecoder] = {}
    while True:
        message = read_frame(requests)
        if message is None:
            return
        kind = message[0]
        if kind == "rows":
            _, key, body, meta = message
            decoder = decoders[key]
            try:
                native = decoder.native  # the C decoder first (cdc.capture.nativeblock), Python as fallback
                lines = native_block(native, body, meta) if native is not None else None
                if lines is not None:
                    (block, count), reply = lines, b"o"
                else:
                    try:
                        images = decoder.fast_images(body, meta.op)
                    except FAST_PATH_ERRORS:
                        block, count, reply = b"", 0, b"s"
                    else:
                        (block, count), reply = rows_block(images, decoder.key_names, meta), b"o"
            except Exception:  # noqa: BLE001 - a bug: tail stops with this text rather than guess
                text = traceback.format_exc().encode()
                replies.write(REPLY.pack(len(text), b"e", 0) + text)
                replies.flush()
                return
            replies.write(REPLY.pack(len(block), reply, count))
            replies.write(block)
            replies.flush()
        elif kind == "define":
            _, key, columns, schema, exclude, hashed, hash_key = message
            decoders[key] = RowDecoder(schema, exclude, hashed, columns, hash_key)
        elif kind == "forget":
            decoders.pop(message[1], None)


if __name__ == "__main__":
    main()
