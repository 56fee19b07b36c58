"""cdc: replicate MySQL into Snowflake through the binary log."""

__version__ = "0.1.0"
