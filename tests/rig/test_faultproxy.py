"""The fault proxy does to a connection what it says: pass, blackhole, stall, half-close, reset (issue #27)."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.rig.faultproxy import FaultProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


class _Shout(socketserver.BaseRequestHandler):
    """Another server: it answers in upper case."""

    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data.upper())


@contextmanager
def _serving(handler: type[socketserver.BaseRequestHandler]) -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    with _serving(_Echo) as port, FaultProxy("127.0.0.1", port) as started:
        yield started


def _client(proxy: FaultProxy, timeout: float = 2.0) -> socket.socket:
    return socket.create_connection((proxy.host, proxy.port), timeout=timeout)


def _echo(sock: socket.socket, data: bytes = b"ping") -> bytes:
    sock.sendall(data)
    return sock.recv(4096)


def test_passes_bytes_both_ways(proxy: FaultProxy) -> None:
    with _client(proxy) as sock:
        assert _echo(sock, b"hello") == b"hello"
        assert proxy.connections() == 1 and len(proxy.accepted) == 1


def test_drop_is_a_blackhole_that_heals_for_new_connections_only(proxy: FaultProxy) -> None:
    old = _client(proxy, timeout=0.5)
    assert _echo(old) == b"ping"
    proxy.drop()
    with pytest.raises(TimeoutError):
        _echo(old)  # no error, no end of stream: silence
    during = _client(proxy, timeout=0.5)
    with pytest.raises(TimeoutError):
        _echo(during)
    proxy.heal()
    old.settimeout(0.5)
    with pytest.raises(TimeoutError):
        old.recv(4096)  # a dropped connection stays dead
    during.settimeout(2)
    assert during.recv(4096) == b"ping"  # one opened in the blackhole gets through once it heals, like a retried SYN
    with _client(proxy) as new:
        assert _echo(new) == b"ping"
    old.close()
    during.close()


def test_stall_delays_then_delivers(proxy: FaultProxy) -> None:
    with _client(proxy, timeout=5) as sock:
        stalling = threading.Thread(target=proxy.stall, args=(1.0,))
        stalling.start()
        time.sleep(0.1)
        began = time.monotonic()
        assert _echo(sock, b"late") == b"late"
        assert time.monotonic() - began >= 0.8
        stalling.join()


def test_half_close_ends_the_stream(proxy: FaultProxy) -> None:
    with _client(proxy) as sock:
        assert _echo(sock) == b"ping"
        proxy.half_close()
        assert sock.recv(4096) == b""


def test_reset_sends_rst(proxy: FaultProxy) -> None:
    with _client(proxy) as sock:
        assert _echo(sock) == b"ping"
        proxy.reset()
        with pytest.raises(ConnectionResetError):
            sock.recv(4096)


def test_retarget_closes_open_connections_and_forwards_new_ones_to_the_new_upstream(proxy: FaultProxy) -> None:
    with _serving(_Shout) as other, _client(proxy) as old:
        assert _echo(old) == b"ping"
        proxy.retarget("127.0.0.1", other)
        assert old.recv(4096) == b""  # the open connection ends, as when the server behind an endpoint changes
        with _client(proxy) as new:
            assert _echo(new) == b"PING"
        assert len(proxy.accepted) == 2
