"""How cdc names things in S3: bucket URLs and table components, shared by the S3 sink, the lake and Snowflake.

A table's name becomes one path component `<db>.<table>`, each part percent-encoded so that any MySQL name
(dots, slashes, quotes, emoji) maps to exactly one key and back: the sink writes under it, the Snowflake
bootstrap points its pipes at it, and the lake keeps one directory per table under the same name.
"""

from __future__ import annotations

from cdc.errors import UsageError

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def split_s3_url(url: str) -> tuple[str, str]:
    """`s3://bucket/some/prefix` -> ("bucket", "some/prefix")."""
    if not url.startswith("s3://") or len(url) <= 5:
        raise UsageError(f"{url!r} is not an s3://bucket/prefix URL")
    bucket, _, prefix = url[5:].partition("/")
    return bucket, prefix.strip("/")


def encode_component(name: str) -> str:
    """Percent-encode every byte that is not [A-Za-z0-9_-] (dots too: `db.table` must stay unambiguous)."""
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in name.encode("utf-8"))


def table_component(db: str, table: str) -> str:
    """One table as one path component: `<db>.<table>`, both encoded."""
    return f"{encode_component(db)}.{encode_component(table)}"
