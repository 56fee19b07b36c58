"""The MySQL side: connections, server checks, retention, snapshot and binlog capture."""
