"""The row decoder: binlog table maps -> our schema, row images -> change-log values."""
