"""`cdc status --metrics-file`: the Prometheus text of a known state directory, parsed back, and its atomic replacement."""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
import threading
from pathlib import Path

import pytest

from cdc.config import load_settings
from cdc.errors import TransientError
from cdc.pipeline.failures import record_failure
from cdc.pipeline.metrics import escape_label, metrics_text, write_metrics
from cdc.pipeline.status import collect_status
from cdc.state import StateDir
from tests.pipeline.cli import run
from tests.pipeline.conftest import BINLOG, change, checkpoint, sealed_batch, write_segments

NOW = dt.datetime(2026, 11, 22, 7, 1, 9, tzinfo=dt.UTC).timestamp()  # 60 s after the last change below
Series = tuple[str, tuple[tuple[str, str], ...]]


def parse(text: str) -> dict[Series, float]:
    """The samples of a metrics text, checked strictly, then read by Prometheus' own parser (prometheus_client)."""
    from prometheus_client.parser import text_string_to_metric_families

    check_shape(text)
    found: dict[Series, float] = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge" and family.documentation, family.name
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in found, f"series {key} twice"
            found[key] = s.value
    return found


_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\\\|\\"|\\n)*"'
_SAMPLE = re.compile(rf"^({_NAME})\{{{_LABEL}(?:,{_LABEL})*\}} (?:[-+]?[0-9.e+-]+|\+Inf|NaN)$")


def check_shape(text: str) -> None:
    """The text format's rules the node-exporter's parser enforces: HELP, TYPE, then the family's samples, once."""
    assert text.endswith("\n") and "\n\n" not in text
    lines, seen = text.splitlines(), set()
    i = 0
    while i < len(lines):
        help_line = re.match(rf"^# HELP ({_NAME}) (\S.*)$", lines[i])
        assert help_line, lines[i]
        name = help_line[1]
        assert name not in seen and lines[i + 1] == f"# TYPE {name} gauge", lines[i: i + 2]
        seen.add(name)
        i += 2
        count = 0
        while i < len(lines) and not lines[i].startswith("#"):
            match = _SAMPLE.match(lines[i])
            assert match and match[1] == name, lines[i]
            i, count = i + 1, count + 1
        assert count, f"{name} has no sample"


def at(path: Path, seconds: float) -> None:
    os.utime(path, (seconds, seconds))


def known_state(state: StateDir) -> list[Path]:
    """Tail, ship-s3, spark-merge and snowflake-apply at known places, with known mtimes and one standing error."""
    segs = write_segments(state, [[change(100)], [change(200), change(200, 1)], [change(300, ts="2026-11-22T07:00:09Z")]])
    checkpoint(state, "tail", file=BINLOG, pos=400, gtid="0-1-9", last_segment=segs[2].name, server_uuid="u")
    checkpoint(state, "ship-s3", last_segment=segs[0].name, destination="s3://lake/cdc")
    checkpoint(state, "merge", last_segment=segs[1].name, last_batch="b000000000002")
    sealed_batch(state, "b000000000001", (segs[0].name, segs[0].name))
    sealed_batch(state, "b000000000002", (segs[1].name, segs[1].name))
    checkpoint(state, "snowflake-apply", last_batch="b000000000001")
    for seg, age in zip(segs, (120, 30, 10)):  # the first was sealed before the last minute
        at(seg, NOW - age)
    for stem, age in (("tail", 10), ("ship-s3", 100), ("merge", 25), ("snowflake-apply", 200)):
        at(state.checkpoint_path(stem), NOW - age)
    record_failure(state, "ship-s3", TransientError("S3 answered 503 SlowDown for s3://lake/cdc"), command="cdc ship",
                   now=NOW - 5)
    return segs


def test_the_metrics_of_a_known_state_directory(state: StateDir) -> None:
    segs = known_state(state)
    settings = load_settings({"state_dir": str(state.root)}, env={}, cwd=state.root)
    text = metrics_text(collect_status(settings, offline=True, now=NOW))
    d = str(state.root.resolve())
    size = [p.stat().st_size for p in segs]

    def series(name: str, stage: str | None = None) -> Series:
        return name, tuple(sorted({"state_dir": d, **({"stage": stage} if stage else {})}.items()))

    stages = ("snapshot", "tail", "ship-kinesis", "ship-s3", "spark-merge", "snowflake-apply")
    expected = {
        series("cdc_status_up"): 1, series("cdc_status_timestamp_seconds"): NOW,
        **{series("cdc_stage_has_checkpoint", s): float(s in ("tail", "ship-s3", "spark-merge", "snowflake-apply"))
           for s in stages},
        series("cdc_stage_last_success_timestamp_seconds", "tail"): NOW - 10,
        series("cdc_stage_last_success_timestamp_seconds", "ship-s3"): NOW - 100,
        series("cdc_stage_last_success_timestamp_seconds", "spark-merge"): NOW - 25,
        series("cdc_stage_last_success_timestamp_seconds", "snowflake-apply"): NOW - 200,
        # tail: offline, the age of the last sealed change (07:00:09); the others: their oldest pending change
        series("cdc_stage_lag_seconds", "tail"): 60, series("cdc_stage_lag_seconds", "ship-s3"): 68,
        series("cdc_stage_lag_seconds", "spark-merge"): 60, series("cdc_stage_lag_seconds", "snowflake-apply"): 68,
        # 3 lines sealed in the last minute (segments 2 and 3); consumers: unknown from a single look
        series("cdc_rows_per_second", "tail"): 3 / 60,
        series("cdc_pending_segments", "ship-s3"): 2, series("cdc_pending_bytes", "ship-s3"): size[1] + size[2],
        series("cdc_pending_segments", "spark-merge"): 1, series("cdc_pending_bytes", "spark-merge"): size[2],
        series("cdc_pending_segments", "snowflake-apply"): 2,
        series("cdc_pending_bytes", "snowflake-apply"): size[1] + size[2],
        series("cdc_pending_batches", "snowflake-apply"): 1,
        **{series("cdc_stage_failing", s): float(s == "ship-s3") for s in stages},
        series("cdc_stage_last_error_timestamp_seconds", "ship-s3"): NOW - 5,
        series("cdc_stage_last_error_exit_code", "ship-s3"): 10,
        series("cdc_stage_consecutive_failures", "ship-s3"): 1,
        series("cdc_retention_runway_min_seconds"): 6 * 3600,
    }
    assert parse(text) == expected


def test_label_values_are_escaped(tmp_path: Path) -> None:
    hostile = tmp_path / 'a "quoted"\\back\nslashed dir'
    state = StateDir(hostile).ensure()
    checkpoint(state, "tail", file=BINLOG, pos=4, gtid=None, last_segment=None, server_uuid="u")
    text = metrics_text(collect_status(load_settings({"state_dir": str(hostile)}, env={}, cwd=tmp_path), offline=True))
    assert 'state_dir="' + str(tmp_path) + '/a \\"quoted\\"\\\\back\\nslashed dir"' in text
    assert {dict(labels)["state_dir"] for _, labels in parse(text)} == {str(hostile)}
    assert escape_label('x\\"\n') == 'x\\\\\\"\\n'


def test_the_cli_writes_it_once_and_says_when_the_state_cannot_be_read(state: StateDir, tmp_path: Path) -> None:
    known_state(state)
    prom = tmp_path / "cdc.prom"
    result = run("status", "--offline", "--json", "--state-dir", str(state.root), "--metrics-file", str(prom))
    assert result.exit_code == 0
    metrics = parse(prom.read_text())
    labels = (("stage", "ship-s3"), ("state_dir", str(state.root.resolve())))
    assert metrics[("cdc_pending_segments", labels)] == 2 and metrics[("cdc_stage_failing", labels)] == 1
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644  # node-exporter runs as its own user

    state.checkpoint_path("tail").write_text('{"version": 1, "file": ')  # corrupt: status exits 5 ...
    result = run("status", "--offline", "--state-dir", str(state.root), "--metrics-file", str(prom))
    assert result.exit_code == 5
    base = (("state_dir", str(state.root.resolve())),)
    metrics = parse(prom.read_text())  # ... and the metrics say so instead of the last good figures
    assert (metrics[("cdc_status_up", base)], metrics[("cdc_status_error_exit_code", base)]) == (0, 5)
    assert not any(name == "cdc_pending_segments" for name, _ in metrics)


@pytest.mark.parametrize("where", ["missing/cdc.prom", "."])
def test_a_metrics_file_that_cannot_be_written_is_refused_first(state: StateDir, tmp_path: Path, where: str) -> None:
    result = run("status", "--offline", "--state-dir", str(state.root), "--metrics-file", str(tmp_path / where))
    assert result.exit_code == 2 and "--metrics-file" in result.output


def test_replacement_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader polling the file (as the collector does at each scrape) sees one whole version or another, never
    half; a write that fails before its rename leaves the old file and no temp file."""
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    path = textfile / "cdc.prom"
    versions = [("# big\n" + "x 1\n" * 200_000), "# small\ny 2\n"]
    write_metrics(path, versions[0])
    seen: set[str] = set()
    torn: list[int] = []
    done = threading.Event()

    def scrape() -> None:
        while not done.is_set():
            text = path.read_text()
            seen.add(text[:7])
            if text not in versions:
                torn.append(len(text))

    reader = threading.Thread(target=scrape)
    reader.start()
    try:
        for i in range(60):
            write_metrics(path, versions[i % 2])
    finally:
        done.set()
        reader.join()
    assert torn == [] and seen == {"# big\nx", "# small"}
    assert [p.name for p in textfile.iterdir()] == ["cdc.prom"]

    def crash(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(Exception, match="cannot write the metrics file .*no space left"):
        write_metrics(path, versions[0])
    assert path.read_text() == versions[1] and [p.name for p in textfile.iterdir()] == ["cdc.prom"]


def test_a_server_that_cannot_be_asked_still_gets_its_metrics_written(state: StateDir, tmp_path: Path) -> None:
    known_state(state)
    prom = tmp_path / "cdc.prom"
    result = run("status", "--state-dir", str(state.root), "--metrics-file", str(prom), "--host", "127.0.0.1",
                 "--port", "1", "--user", "cdc")  # nothing listens on port 1
    assert result.exit_code in (1, 10) and "127.0.0.1:1" in result.output
    metrics = parse(prom.read_text())
    base = (("state_dir", str(state.root.resolve())),)
    assert metrics[("cdc_server_up", base)] == 0 and metrics[("cdc_status_up", base)] == 1
    assert metrics[("cdc_pending_segments", (("stage", "ship-s3"), *base))] == 2  # the local figures stand
    assert ("cdc_binlog_bytes_behind", base) not in metrics and ("cdc_retention_runway_seconds", base) not in metrics
