"""Security promises (SECURITY.md), each held by a test that exercises the real parts (#26)."""
