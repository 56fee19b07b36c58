"""Every file cdc writes holds rows or positions: 0600 in 0700 directories, whatever the umask it was started
with — checkpoints, schema history, snapshot chunks, change-log segments, lake and batch files (#26).

The end-to-end check rides on runs that write every kind of file anyway (tests/security/modes.py): the
`cdc run`s of tests/pipeline/test_run.py's until-now test start under umask 000, tests/pipeline/test_masking.py's
under 022. Two `cdc run`s of its own per umask cost ~45 CPU s each pair, mostly Spark's JVM.
"""

from __future__ import annotations

import stat
from pathlib import Path

from cdc.state import StateDir


def test_an_existing_open_state_directory_is_narrowed_by_the_stage_that_uses_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)  # made by an older cdc under umask 022
    StateDir(state).ensure()  # what snapshot, tail, spark-merge and run do first
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
