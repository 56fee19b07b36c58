"""cdc test suite (a package, so test folders never shadow real packages such as `snowflake`)."""
