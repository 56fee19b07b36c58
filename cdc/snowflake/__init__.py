"""Snowflake: type map, names, DDL rendering, connections, bootstrap and apply."""
