"""Per-table schema history (docs/formats.md): the columns and foreign keys of each table as of each position.

Events are decoded with the schema in force at their position, never with today's
information_schema: after an ALTER, older events still have the old column list.
A pure model (plus its files in the state directory): reading a schema from the server is
cdc.source.schema_reads. `table` is the model of one version; `history` keeps each table's versions in its file.
"""

from cdc.schema.history import HISTORY_VERSION, SchemaHistory
from cdc.schema.table import (
    CASCADES_LOGGED_FROM,
    CASCADING_RULES,
    Carried,
    Column,
    ForeignKey,
    TableSchema,
    carried,
    cascades_in_binlog,
    parse_labels,
    varchar_length,
)

__all__ = [
    "CASCADES_LOGGED_FROM", "CASCADING_RULES", "HISTORY_VERSION", "Carried", "Column", "ForeignKey", "SchemaHistory",
    "TableSchema", "carried", "cascades_in_binlog", "parse_labels", "varchar_length",
]
