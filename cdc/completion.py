"""What shell completion offers for option values: fixed choices, and table names from the state directory.

commands/ adapts these to typer's `autocompletion=`; nothing here knows a shell or a CLI toolkit.
Completion runs on every Tab press: it reads only local files (the schema history that tail and snapshot
record), never connects to MySQL, and fails silent (no candidates) rather than print an error into the shell.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cdc.config import load_settings
from cdc.schema import SchemaHistory
from cdc.settings import SSL_MODES
from cdc.state import DEFAULT_STATE_DIR, StateDir

# `cdc ship --to`: the two sinks (s3://bucket/prefix is accepted too, but there is nothing to offer for it).
SHIP_TARGETS = ("kinesis", "s3")


def matching(choices: Iterable[str], incomplete: str) -> list[str]:
    """The choices that start with what was typed so far, in their own order."""
    return [choice for choice in choices if choice.startswith(incomplete)]


def ssl_modes(incomplete: str) -> list[str]:
    """--ssl-mode values; typed in lower case, the lower-case spellings are offered (both are accepted)."""
    if incomplete and incomplete == incomplete.lower():
        return matching((mode.lower() for mode in SSL_MODES), incomplete)
    return matching(SSL_MODES, incomplete)


def state_dir_for(state_dir: str | Path | None, config: str | Path | None) -> Path:
    """The state directory a command line names: --state-dir, else cdc.toml / CDC_STATE_DIR, else the default."""
    if state_dir:
        return Path(state_dir)
    try:
        return Path(load_settings(config_path=config).state_dir)
    except Exception:  # a broken or missing cdc.toml must not break Tab: fall back to the default
        return Path(DEFAULT_STATE_DIR)


def known_tables(root: Path) -> list[tuple[str, str]]:
    """(db, table) of every table whose schema history the state directory holds, sorted; [] when unreadable."""
    try:
        return sorted(set(SchemaHistory(StateDir(root).schema).tables()))
    except Exception:  # a corrupt or unreadable history file: completion stays silent
        return []


def table_patterns(root: Path, incomplete: str) -> list[str]:
    """Candidates for --tables / --exclude-tables: `db.*` per database, then each `db.table`.

    A comma-separated value completes its last item (`shop.orders,shop.c` -> `shop.orders,shop.customers`),
    since the list options accept both a repeated flag and commas.
    """
    done, _, last = incomplete.rpartition(",")
    lead = f"{done}," if done else ""
    tables = known_tables(root)
    databases = sorted({db for db, _ in tables})
    candidates = [f"{db}.*" for db in databases] + [f"{db}.{table}" for db, table in tables]
    already = set(done.split(",")) if done else set()
    return [lead + name for name in matching(candidates, last) if name not in already]
