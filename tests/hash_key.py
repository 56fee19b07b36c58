"""The HMAC key tests hash columns with, handed to cdc through the environment as a user would (#26)."""

from __future__ import annotations

import hashlib
import hmac

from cdc.masking import HashKey

ENV = "CDC_MYSQL_HASH_KEY"
HASH_KEY = "cdc-tests-" + "k3y" * 10  # 40 bytes: test data, not a secret
KEY = HashKey(HASH_KEY.encode(), "environment CDC_MYSQL_HASH_KEY")


def hmac_hex(data: bytes, key: str = HASH_KEY) -> str:
    """What a hashed column holds, computed here without cdc: HMAC-SHA-256 hex of the change-log value."""
    return hmac.new(key.encode(), data, hashlib.sha256).hexdigest()
