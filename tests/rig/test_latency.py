"""The latency proxy delays each way and carries every byte, in order, to the end of stream (issue #25)."""

from __future__ import annotations

import socket
import socketserver
import threading
import time

from tests.rig.latency import LatencyProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


def _echo_server() -> socketserver.ThreadingTCPServer:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _receive(sock: socket.socket, size: int) -> bytes:
    got = bytearray()
    while len(got) < size:
        chunk = sock.recv(65536)
        assert chunk, "end of stream before every byte came back"
        got += chunk
    return bytes(got)


def test_a_round_trip_takes_the_delay_both_ways_and_large_transfers_arrive_whole() -> None:
    server = _echo_server()
    try:
        with LatencyProxy("127.0.0.1", server.server_address[1], one_way=0.1) as proxy, \
                socket.create_connection((proxy.host, proxy.port)) as sock:
            start = time.monotonic()
            sock.sendall(b"ping")
            assert _receive(sock, 4) == b"ping"
            assert time.monotonic() - start >= 0.2  # 0.1 s there and 0.1 s back
            payload = bytes(range(256)) * 16384  # 4 MiB: many chunks, one byte order
            writer = threading.Thread(target=sock.sendall, args=(payload,))
            writer.start()
            assert _receive(sock, len(payload)) == payload
            writer.join()
            sock.shutdown(socket.SHUT_WR)  # the echo server sees the end, closes, and so do we
            assert sock.recv(1) == b""
            assert proxy.connections == 1
    finally:
        server.shutdown()
        server.server_close()
