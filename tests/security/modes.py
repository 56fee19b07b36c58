"""What "private" means for a state directory: 0600 files in 0700 directories, nothing else (#26).

Checked at the end of end-to-end runs started under a permissive umask (tests/pipeline/test_run.py under 000,
tests/pipeline/test_masking.py under 022): each run already writes every kind of file, so the check costs no
`cdc run` of its own.
"""

from __future__ import annotations

import stat
from pathlib import Path


def open_modes(root: Path) -> dict[str, str]:
    """Every entry under root (root included) whose mode is not 0700 (directory) / 0600 (file)."""
    found = {}
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        wanted = 0o700 if stat.S_ISDIR(mode) else 0o600
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)) or stat.S_IMODE(mode) != wanted:
            found[str(path.relative_to(root.parent))] = oct(mode)
    return found


def assert_private_state(state: Path) -> None:
    """A state directory after a snapshot run and a tail run: every kind of file there, and all of them private."""
    kinds = {p.relative_to(state).parts[0] for p in state.iterdir()}
    assert {"changelog", "schema", "lake", "batches", "locks", "tail.json", "merge.json"} <= kinds, kinds
    assert list((state / "lake").rglob("*.parquet")) and list((state / "batches").rglob("*.parquet"))
    assert list((state / "changelog").iterdir())
    assert open_modes(state) == {}
