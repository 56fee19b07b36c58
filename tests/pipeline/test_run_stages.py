"""What `cdc run` keeps across cycles (cdc.pipeline.run_stages.Context): one Snowflake login, renewed when idle."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from cdc.config import Settings
from cdc.pipeline import run_stages
from cdc.pipeline.run_stages import Context
from cdc.state import StateDir


def test_cycles_share_one_snowflake_login_and_an_idle_one_is_renewed(snowflake_env: dict[str, Any],
                                                                     tmp_path: Path) -> None:
    settings = Settings(state_dir=str(tmp_path / "state"))
    ctx = Context(settings, StateDir(settings.state_dir).ensure(), threading.Event(), lambda _p: None)
    try:
        first = ctx.snowflake_connection()
        assert ctx.snowflake_connection() is first  # the next stage, the next cycle: no new login
        ctx.snowflake_used -= run_stages.SNOWFLAKE_IDLE_SECONDS + 1  # as if unused for longer than that
        renewed = ctx.snowflake_connection()
        assert renewed is not first
        assert renewed.cursor().execute("SELECT 1").fetchall() == [(1,)]
    finally:
        ctx.close()
    assert ctx.snowflake is None
