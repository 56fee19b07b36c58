"""Tail's half of the locked chunk read (cdc.lockedreads has the protocol and the argument why it is exact).

At a transaction boundary, before the next event, tail looks for the resnapshot's intent: it opens a
window for the table (the same windows as watermarks: noted keys, a held checkpoint, DDL refused) and
acknowledges; once the chunk is ready and tail's boundary is at or past P, it records E and emits the chunk
(or the table's end line) there as a transaction of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cdc.capture.windows import AddLines, MarkEvent, Windows
from cdc.changelog import file_seq, position_string
from cdc.lockedreads import CHUNK, Intent, intents, read_position, read_ready, step_path, write_position
from cdc.source.binlog import Position
from cdc.state import StateDir
from cdc.watermarks import CANCEL, END, HIGH, LOW, Mark

POLL_SECONDS = 0.2  # how often tail looks for a new intent or a ready chunk (one directory listing)


@dataclass(frozen=True)
class BetweenEvent(MarkEvent):
    """A boundary between two transactions: lines emitted there take row numbers from `row_base` on."""

    row_base: int = 0

    def position(self, row: int) -> str:
        return super().position(self.row_base + row)


Emit = Callable[[Callable[[AddLines], None]], None]  # fill the lines of one transaction of their own


@dataclass
class _Step:
    path: Path
    intent: Intent


class LockedReads:
    """The locked read tail is serving, if any: at most one at a time (the resnapshot waits for each)."""

    def __init__(self, state: StateDir, windows: Windows) -> None:
        self.root, self.windows = state.root, windows
        self._step: _Step | None = None
        self._polled_at = 0.0  # monotonic; 0: look at once (a restarted tail must find an open step first)
        self._emitted: list[tuple[Path, Position]] = []  # `.done` files to write with the next checkpoint
        self._served: set[Path] = set()  # intents this run emitted: until their `.done`, never emitted again

    def confirm(self) -> None:
        """Just before tail.json is written: every step emitted before it is sealed (cdc.capture.commit seals first),
        so `.done` tells the resnapshot it may go on and a restarted tail never emits it again."""
        for path, where in self._emitted:
            write_position(path, where)
        self._emitted.clear()

    def is_due(self) -> bool:
        return self._step is not None or time.monotonic() - self._polled_at >= POLL_SECONDS

    def poll(self, at: Position, seq_offset: int, skip_until: str | None, emit: Emit) -> None:
        """At boundary `at` (tail.json's position now): open, emit or give up the current step."""
        now = time.monotonic()
        if self._step is None:
            if now - self._polled_at < POLL_SECONDS:
                return
            self._polled_at = now
            self._step = self._find(at, seq_offset)
            return
        step, directory = self._step, self._step.path.parent
        intent = step.intent
        if not step.path.exists():  # `cdc resnapshot --cancel` removed the run: emit nothing
            self.windows.on_mark(Mark(intent.run, CANCEL, intent.db, intent.table), self._event(at, seq_offset), _none)
            self._step = None
            return
        chosen = read_position(step_path(directory, intent.chunk, "at"))
        ready = read_ready(directory, intent.chunk) if intent.kind == CHUNK else None
        if chosen is None:
            if now - self._polled_at < POLL_SECONDS:
                return
            self._polled_at = now
            if (intent.kind == CHUNK and (ready is None or _key(at) < _key(ready.p))) or _sealed(at, seq_offset,
                                                                                               skip_until):
                return
            chosen = at
            write_position(step_path(directory, intent.chunk, "at"), chosen)  # before the lines: a rerun emits here
        elif _key(at) < _key(chosen):
            return
        base = ready.row_base if ready is not None else intent.row_base
        event = BetweenEvent(chosen.file, chosen.pos, None, 0, seq_offset, base)  # server_id 0: tail wrote it
        if intent.kind == CHUNK:
            if ready is None:  # gone: the resnapshot saw this step past tail's checkpoint
                self._step = None
                return
            mark = Mark(intent.run, HIGH, intent.db, intent.table, intent.chunk, file=ready.file)
        else:
            mark = Mark(intent.run, END, intent.db, intent.table, intent.chunk, cut=intent.cut)
        # Before the lines: writing them may seal the segment and write tail.json at once, and `.done` must come first.
        self._emitted.append((step_path(directory, intent.chunk, "done"), chosen))
        self._served.add(step.path)
        emit(lambda add: self.windows.on_mark(mark, event, add))
        self._step = None

    def _find(self, at: Position, seq_offset: int) -> _Step | None:
        for path, intent in intents(self.root):
            if path in self._served or step_path(path.parent, intent.chunk, "done").exists():
                continue  # sealed before a checkpoint: the resnapshot removes it
            if intent.kind == CHUNK:
                self.windows.on_mark(Mark(intent.run, LOW, intent.db, intent.table, intent.chunk),
                                     self._event(at, seq_offset), _none)
                ack = step_path(path.parent, intent.chunk, "ack")
                if not ack.exists():
                    write_position(ack, at)
            return _Step(path, intent)
        return None

    @staticmethod
    def _event(at: Position, seq_offset: int) -> BetweenEvent:
        return BetweenEvent(at.file, at.pos, None, 0, seq_offset)


def _none(first: str, block: bytes, count: int) -> None:
    """Low and cancel marks add no lines."""


def _key(position: Position) -> tuple[int, int]:
    return file_seq(position.file), position.pos


def _sealed(at: Position, seq_offset: int, skip_until: str | None) -> bool:
    """Lines at `at` would fall among those a killed run already sealed (and be skipped): not a place to emit."""
    return skip_until is not None and position_string(at.file, at.pos, 0, seq_offset=seq_offset) <= skip_until
