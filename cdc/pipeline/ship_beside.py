"""`cdc run --follow`'s ship stages in a thread beside the merge of the same cycle (issue #25).

The merge reads the local change log, never what ship wrote, so the two never wait for each other; run one after
the other, ship's time (~0.2-0.5 s a cycle) was added to every cycle (docs/performance.md, "Freshness"). The cycle
loop (cdc.pipeline.run) uses it from the second cycle on (the first is the chain as --until-now runs it): `start`
when the chain reaches a ship stage, `join` once the merge is done. The thread reports nothing itself: `join`
reports its stage lines from the cycle's thread, after the merge's, and raises its error there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

SHIP_STAGES = ("ship-s3", "ship-kinesis")

# (stage, cycle, on_stage) -> the stage's result line; raises StageError (cdc.pipeline.run._run_stage).
StageRunner = Callable[[str, int, Callable[[Any], None]], Any]


class ShipBeside:
    """One cycle's ship stages, run in a thread while the cycle's merge runs."""

    def __init__(self, chain: Sequence[str], cycle: int, run_stage: StageRunner, stop: threading.Event) -> None:
        self.stages = [s for s in chain if s in SHIP_STAGES] if "spark-merge" in chain else []
        self._cycle, self._run_stage, self._stop = cycle, run_stage, stop
        self._lines: list[Any] = []  # StageResults, a failed one included, in stage order
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._ship, name="cdc-run-ship", daemon=True)
            self._thread.start()

    def _ship(self) -> None:
        try:
            for stage in self.stages:
                if self._stop.is_set():
                    return
                self._lines.append(self._run_stage(stage, self._cycle, self._lines.append))
        except BaseException as exc:  # noqa: BLE001 - raised again by join(), in the cycle's thread
            self._error = exc

    def join(self, report: Callable[[Any], None], *, raise_error: bool = True) -> None:
        """Wait for the thread; report its lines, then raise its error (unless another error is on its way)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join()
        for line in self._lines:
            report(line)
        if self._error is not None and raise_error:
            raise self._error
