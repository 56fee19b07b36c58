"""A TCP proxy that adds a fixed delay each way, as a link to a distant server would (issue #25).

    with LatencyProxy(server.host, server.port, one_way=0.025) as proxy:  # cdc connects to proxy.host:proxy.port
        ...                                                                # each round trip takes 50 ms more

The stand-in for Snowflake answers in the same machine, where a statement's round trip costs nearly nothing;
Snowflake is a WAN away. The delay is latency, not a bandwidth cap: each chunk read is sent `one_way` seconds
after it arrived, whatever else is in flight, so a large upload costs one delay, not one per chunk. Per
connection and direction a reader thread stamps the chunks and a writer thread sends them when due.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from types import TracebackType

_END = b""  # queued at end of stream: the writer passes the half-close on


class LatencyProxy:
    """Listen on 127.0.0.1 (a free port), forward each connection to upstream with `one_way` seconds of delay."""

    def __init__(self, upstream_host: str, upstream_port: int, *, one_way: float) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.one_way = one_way
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = "127.0.0.1", int(self._listener.getsockname()[1])
        self._stopped = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.connections = 0  # accepted so far

    def __enter__(self) -> LatencyProxy:
        threading.Thread(target=self._accept, name=f"latency proxy :{self.port}", daemon=True).start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stopped.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):  # a chunk due is sent now: no wait for the ACK of the one before it
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets += [client, upstream]
                self.connections += 1
            for src, dst in ((client, upstream), (upstream, client)):
                chunks: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()
                threading.Thread(target=self._read, args=(src, chunks), daemon=True).start()
                threading.Thread(target=self._write, args=(dst, chunks), daemon=True).start()

    def _read(self, src: socket.socket, chunks: queue.SimpleQueue[tuple[float, bytes]]) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = _END
            chunks.put((time.monotonic() + self.one_way, data))
            if not data:
                return

    @staticmethod
    def _write(dst: socket.socket, chunks: queue.SimpleQueue[tuple[float, bytes]]) -> None:
        while True:
            due, data = chunks.get()
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
            except OSError:
                return
