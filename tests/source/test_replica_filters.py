"""A replica's replicate-* filters judged as MySQL applies them to row events (check-binlog's verdict on a real
replica: tests/commands/test_check_binlog.py)."""

from __future__ import annotations

import pytest

from cdc.source.replica_filters import ReplicaFilters, unreplicated


@pytest.mark.parametrize(("filters", "skipped"), [
    (ReplicaFilters(), []),
    (ReplicaFilters(do_db=("shop",)), ["crm.users (replicate_do_db=shop)"]),
    (ReplicaFilters(ignore_db=("crm",)), ["crm.users (replicate_ignore_db=crm)"]),
    (ReplicaFilters(do_db=("shop",), ignore_db=("shop",)), ["crm.users (replicate_do_db=shop)"]),  # do-db wins
    (ReplicaFilters(ignore_table=("shop.orders",)), ["shop.orders (replicate_ignore_table=shop.orders)"]),
    (ReplicaFilters(do_table=("shop.orders",)), ["shop.order_items (replicate_do_table / replicate_wild_do_table "
                                                  "(shop.orders))", "crm.users (replicate_do_table / "
                                                  "replicate_wild_do_table (shop.orders))"]),
    # LIKE patterns: `_` is any one character unless escaped, `%` any run.
    (ReplicaFilters(wild_ignore=("shop.order\\_%",)), ["shop.order_items (replicate_wild_ignore_table=shop.order\\_%)"]),
    (ReplicaFilters(wild_ignore=("shop.order_",)), ["shop.orders (replicate_wild_ignore_table=shop.order_)"]),
    (ReplicaFilters(wild_do=("shop.%",), wild_ignore=("shop.%",)), ["crm.users (replicate_do_table / "
                                                                    "replicate_wild_do_table (shop.%))"]),  # do first
])
def test_the_tables_a_replica_skips(filters: ReplicaFilters, skipped: list[str]) -> None:
    tables = [("shop", "orders"), ("shop", "order_items"), ("crm", "users")]
    assert unreplicated(filters, tables) == skipped
