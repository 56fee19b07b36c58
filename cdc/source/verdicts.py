"""What check-binlog returns: a Check per verdict (ok, warn or fail, with the exact fix) and the Report of them all."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from cdc.source.connect import TlsState

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    value: str
    expected: str = ""
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Report:
    server: dict[str, Any]
    checks: tuple[Check, ...]
    strict: bool = False
    tls: TlsState | None = None
    cascades: tuple[dict[str, Any], ...] = ()  # cascading foreign keys and how cdc handles each (cascade_notes)

    @property
    def ok(self) -> bool:
        """Nothing failed (with strict, nothing warned either)."""
        bad = (FAIL, WARN) if self.strict else (FAIL,)
        return not any(check.status in bad for check in self.checks)

    def count(self, status: str) -> int:
        return sum(1 for check in self.checks if check.status == status)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "server": self.server, "tls": self.tls.to_dict() if self.tls else None,
                "checks": [check.to_dict() for check in self.checks], "cascading_foreign_keys": list(self.cascades)}

