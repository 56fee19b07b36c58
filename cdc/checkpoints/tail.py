"""tail.json (version 2): where tail resumes, on which server, and what it has captured (docs/formats.md).

Version 2 added gtid_state, seq_offset and skip_gtids; a version 1 file reads as "GTID state unknown"
(tail asks the server for the state at `pos` on its next run) and offset 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from cdc.checkpoints.record import Checkpoint, Document, Fields, Migration
from cdc.errors import UsageError
from cdc.gtid import GtidSet


def _v1_to_v2(document: Document) -> Document:
    # Fields a v1 file cannot have; setdefault-like so a hand-made v1 that has them keeps them, as ever.
    return {"gtid_state": None, "seq_offset": 0, **document, "version": 2}


@dataclass(frozen=True)
class TailCheckpoint(Checkpoint):
    """Tail's position: always the end of a transaction whose rows are all in a sealed segment."""

    STAGE: ClassVar[str] = "tail"
    FILE: ClassVar[str] = "tail"
    VERSION: ClassVar[int] = 2
    MIGRATIONS: ClassVar[Mapping[int, Migration]] = {1: _v1_to_v2}

    file: str
    pos: int
    gtid: str | None = None  # the last transaction's GTID
    last_segment: str | None = None
    server_uuid: str | None = None  # None only in files of a very old cdc: server.json then names the server
    gtid_state: str | None = None  # every transaction read up to `pos` (None: unknown, or GTIDs are off)
    seq_offset: int = 0  # added to binlog file numbers in change-log positions (set by --rebase)
    skip_gtids: tuple[str, ...] = ()  # captured before a --rebase and still ahead on the new server

    def to_dict(self) -> Document:
        document: Document = {
            "version": self.VERSION, "file": self.file, "pos": self.pos, "gtid": self.gtid,
            "last_segment": self.last_segment, "server_uuid": self.server_uuid, "gtid_state": self.gtid_state,
            "seq_offset": self.seq_offset,
        }
        if self.skip_gtids:  # written only while a --rebase still has captured transactions ahead
            document["skip_gtids"] = list(self.skip_gtids)
        return document

    @classmethod
    def from_fields(cls, fields: Fields) -> TailCheckpoint:
        gtid_state = fields.optional_text("gtid_state")
        try:
            GtidSet.parse(gtid_state)  # a malformed set would make --rebase and `cdc wait --gtid` guess
        except UsageError as exc:
            raise fields.corrupt(f"gtid_state {gtid_state!r}: {exc.message}") from None
        return cls(fields.text("file"), fields.integer("pos"), fields.optional_text("gtid"),
                   fields.optional_text("last_segment"), fields.optional_text("server_uuid"), gtid_state,
                   fields.integer("seq_offset", 0), fields.texts("skip_gtids"))
