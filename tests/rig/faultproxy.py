"""A TCP proxy the tests drive to break the network between cdc and a server (issue #27).

    with FaultProxy(server.host, server.port) as proxy:   # cdc connects to proxy.host:proxy.port
        proxy.stall(3)        # nothing moves either way for 3 s, then everything buffered is delivered
        proxy.drop()          # a blackhole: open connections never carry another byte; new ones wait...
        proxy.heal()          # ...until heal(); connections dropped before stay dead (silently, no FIN)
        proxy.half_close()    # FIN to both ends of every open connection (each sees end-of-stream)
        proxy.reset()         # RST to both ends of every open connection (SO_LINGER 0, then close)
        proxy.retarget(h, p)  # new connections go to h:p; open ones are closed (an endpoint moved by a failover)
        proxy.reset_next([0, 300])  # the next connections: RST once the server sent each that many bytes

`Chaos(proxy, rng)` applies such faults at random moments from a thread, logging what it did and when.
Plain threads and sockets: each connection has two pumps, client -> upstream and upstream -> client.
A paused pump leaves bytes in the kernel's buffers rather than reading them, so the sender's TCP sees a
peer that stopped reading, as with a real stall.
"""

from __future__ import annotations

import random
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType

_POLL = 0.05  # seconds a pump waits for bytes before it looks at its connection's state again


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, client: socket.socket, upstream: socket.socket, paused: bool) -> None:
        self.client, self.upstream = client, upstream
        self.dead = False  # dropped: never forwards again, never closes by itself
        self.paused = paused  # stalled: forwards again when resumed
        self.draining = False  # half-closed: reads and discards until the end of stream, then closes
        self.closed = False
        self.upstream_budget: int | None = None  # reset_next(): bytes from the server it carries before an RST
        self.cut_with_fin = False  # reset_next(fin=True): a FIN to both ends instead (the client reads a clean end)
        self._ends = 0  # directions that reached end of stream: both, and the link closes
        self._lock = threading.Lock()

    def pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self.closed:
                if (self.dead and not self.draining) or self.paused:
                    time.sleep(_POLL)
                    continue
                readable, _, _ = select.select([src], [], [], _POLL)
                if not readable or (self.dead and not self.draining) or self.paused:
                    continue
                data = src.recv(65536)
                if self.draining:
                    if not data:
                        self.close()
                    continue
                if not data:  # end of stream: pass the half-close on, as a router would
                    dst.shutdown(socket.SHUT_WR)
                    self._ended()
                    return
                if src is self.upstream and self.upstream_budget is not None and len(data) > self.upstream_budget:
                    dst.sendall(data[:self.upstream_budget])  # a reply cut short by the reset, mid-packet
                    if self.cut_with_fin:
                        self.shutdown_both()
                        continue
                    self.close(reset=True)
                    return
                if src is self.upstream and self.upstream_budget is not None:
                    self.upstream_budget -= len(data)
                dst.sendall(data)
        except (OSError, ValueError):  # the other pump or a fault closed the sockets
            self.close()

    def _ended(self) -> None:
        with self._lock:
            self._ends += 1
            both = self._ends == 2
        if both:
            self.close()

    def shutdown_both(self) -> None:
        self.dead = self.draining = True
        for sock in (self.client, self.upstream):
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def close(self, *, reset: bool = False) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
        for sock in (self.client, self.upstream):
            try:
                if reset:  # linger on, timeout 0: close() sends RST instead of FIN
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            except OSError:
                pass


class FaultProxy:
    """Listen on 127.0.0.1 (a free port), forward each connection to upstream, break them on request."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = "127.0.0.1", int(self._listener.getsockname()[1])
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._blackhole = False  # drop(): new connections are accepted but carry nothing
        self._doomed: list[int] = []  # reset_next(): byte budgets of the next connections
        self._doomed_fin = False
        self._stalled = False
        self._stopped = threading.Event()
        self.accepted: list[float] = []  # monotonic time of each accepted connection
        self._thread = threading.Thread(target=self._accept, name=f"fault proxy :{self.port}", daemon=True)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _accept(self) -> None:
        self._listener.settimeout(_POLL * 4)
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()  # the server is down: the client sees its connection closed, as without us
                continue
            upstream.settimeout(None)
            # Accepted in a blackhole: a real client's SYN would be lost and retried, and get through once the
            # network heals; so the connection waits (paused), it is not dead.
            link = _Link(client, upstream, paused=self._stalled or self._blackhole)
            with self._lock:
                if self._doomed:
                    link.upstream_budget = self._doomed.pop(0)
                    link.cut_with_fin = self._doomed_fin
                self._links = [old for old in self._links if not old.closed] + [link]
                self.accepted.append(time.monotonic())
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=link.pump, args=(src, dst), daemon=True).start()

    def _open(self) -> list[_Link]:
        with self._lock:
            return [link for link in self._links if not link.closed]

    def connections(self) -> int:
        """Connections open through the proxy now."""
        return len(self._open())

    def drop(self) -> None:
        """Blackhole: open connections go silent for good; new ones are accepted but carry nothing until heal()."""
        self._blackhole = True
        for link in self._open():
            link.dead = True

    def heal(self) -> None:
        """Connections opened since the drop and stalled ones carry bytes again (dropped ones stay silent)."""
        self._blackhole = False
        self.resume()

    def stall(self, seconds: float) -> None:
        """Nothing moves for `seconds` (new connections included), then everything buffered is delivered."""
        self._stalled = True
        for link in self._open():
            link.paused = True
        time.sleep(seconds)
        self.resume()

    def resume(self) -> None:
        self._stalled = False
        for link in self._open():
            link.paused = False

    def half_close(self) -> None:
        """Send FIN to both ends of every open connection: each reads end-of-stream."""
        for link in self._open():
            link.shutdown_both()

    def reset(self) -> None:
        """Send RST to both ends of every open connection."""
        for link in self._open():
            link.close(reset=True)

    def reset_next(self, budgets: list[int], *, fin: bool = False) -> None:
        """Reset each of the next len(budgets) connections (RST to both ends) once the server has sent it its budget
        of bytes: 0 strikes in the handshake, a few hundred in the first queries a client sends after it. fin: end
        them with a FIN instead, as a half-close does; the client reads a clean end of stream in mid-answer."""
        with self._lock:
            self._doomed, self._doomed_fin = list(budgets), fin

    def retarget(self, host: str, port: int) -> None:
        """Forward new connections to host:port and close the open ones: what an endpoint standing for a replication
        topology (RDS, Aurora, a DNS name or virtual IP) does when it moves to the promoted replica."""
        self.upstream = (host, port)
        for link in self._open():
            link.close()

    def close(self) -> None:
        self._stopped.set()
        self._listener.close()
        for link in self._open():
            link.close()
        if self._thread.is_alive():
            self._thread.join(5)


FAULTS = ("drop", "stall", "half-close", "reset")


@dataclass
class Chaos:
    """Faults on `proxy` at random moments from a background thread, until stopped; `log` records them.

    A drop lasts `drop_seconds` (then heal()), a stall a random time within `stall_seconds`; between two
    faults the network works for a random time within `calm_seconds`.
    """

    proxy: FaultProxy
    rng: random.Random
    faults: tuple[str, ...] = FAULTS
    calm_seconds: tuple[float, float] = (2.0, 6.0)
    stall_seconds: tuple[float, float] = (0.5, 4.0)
    drop_seconds: float = 3.0
    every_fault_first: bool = True  # the first len(faults) faults are each kind once, in a random order
    log: list[tuple[float, str]] = field(default_factory=list)  # (monotonic time, fault)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Chaos:
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        self.proxy.heal()

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for _, fault in self.log:
            found[fault] = found.get(fault, 0) + 1
        return found

    def _run(self) -> None:
        first = self.rng.sample(self.faults, len(self.faults)) if self.every_fault_first else []
        while not self._stop.wait(self.rng.uniform(*self.calm_seconds)):
            fault = first.pop() if first else self.rng.choice(self.faults)
            self.log.append((time.monotonic(), fault))
            self.apply(fault)

    def apply(self, fault: str) -> None:
        if fault == "drop":
            self.proxy.drop()
            self._stop.wait(self.drop_seconds)
            self.proxy.heal()
        elif fault == "stall":
            self.proxy.stall(self.rng.uniform(*self.stall_seconds))
        elif fault == "half-close":
            self.proxy.half_close()
        elif fault == "reset":
            self.proxy.reset()
        else:
            raise ValueError(f"unknown fault {fault!r}")
