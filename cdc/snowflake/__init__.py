"""Snowflake: type map, names, DDL rendering, connections, bootstrap and apply.

Other packages use only the names below; the connector and pyarrow load on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc.lazy import exports

if TYPE_CHECKING:
    from cdc.snowflake.apply import Applier
    from cdc.snowflake.apply import run as apply_batches
    from cdc.snowflake.bootstrap import Options as BootstrapOptions
    from cdc.snowflake.bootstrap import bootstrap_history, existing_columns
    from cdc.snowflake.connect import connect as connect_snowflake
    from cdc.snowflake.connect import cursor as snowflake_cursor
    from cdc.snowflake.ddl import Target, build_target
    from cdc.snowflake.folded import fold as fold_batches_into
    from cdc.snowflake.folded import read_folded
    from cdc.snowflake.names import BOOKKEEPING_TABLE, CDC_DELETED, snowflake_name
    from cdc.snowflake.sealed import list_batches

_HOMES = {"Applier": "cdc.snowflake.apply", "list_batches": "cdc.snowflake.sealed", "apply_batches": "cdc.snowflake.apply:run",
          "BootstrapOptions": "cdc.snowflake.bootstrap:Options", "bootstrap_history": "cdc.snowflake.bootstrap",
          "existing_columns": "cdc.snowflake.bootstrap", "connect_snowflake": "cdc.snowflake.connect:connect",
          "snowflake_cursor": "cdc.snowflake.connect:cursor",
          "Target": "cdc.snowflake.ddl", "build_target": "cdc.snowflake.ddl", "BOOKKEEPING_TABLE": "cdc.snowflake.names",
          "CDC_DELETED": "cdc.snowflake.names", "snowflake_name": "cdc.snowflake.names",
          "read_folded": "cdc.snowflake.folded", "fold_batches_into": "cdc.snowflake.folded:fold"}

__all__ = ["Applier", "BOOKKEEPING_TABLE", "BootstrapOptions", "CDC_DELETED", "Target", "apply_batches", "bootstrap_history",
           "build_target", "connect_snowflake", "existing_columns", "fold_batches_into", "list_batches", "read_folded",
           "snowflake_cursor", "snowflake_name"]

__getattr__ = exports(__name__, _HOMES)
