"""What every stage checkpoint shares: its file, its version, reading with migration, writing atomically.

A checkpoint is `<state>/<FILE>.json`, a JSON object with a `"version"`. Reading refuses a version newer
than this cdc (StateDir.read_checkpoint), migrates an older one step by step to the current shape, then
checks every field's type: a wrong one is a PositionError naming the file and the field, because a guessed
position would skip or repeat changes. Writing goes through StateDir.write_checkpoint (temp file in the same
directory, fsync, rename, fsync of the directory; mode 0600 from mkstemp), sorted keys, two-space indent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from cdc.errors import PositionError
from cdc.state import StateDir

Document = dict[str, Any]
Migration = Callable[[Document], Document]
V = TypeVar("V", bound="CheckpointView")
_MISSING = object()
# What a reader says a field should have been; "a integer" is the wording `cdc status` has always printed.
_KINDS = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "list",
          type(None): "null"}


class CheckpointView:
    """The reading side of a stage's checkpoint file (a subclass is a frozen dataclass of its fields)."""

    STAGE: ClassVar[str]  # the stage as `cdc run --stages` names it (also its lock name)
    FILE: ClassVar[str]  # the file's stem in the state directory
    VERSION: ClassVar[int]  # the version this cdc writes; 1..VERSION are read
    # MIGRATIONS[n] turns a version-n document into a version-(n + 1) one.
    MIGRATIONS: ClassVar[Mapping[int, Migration]] = {}

    @classmethod
    def path(cls, state: StateDir) -> Path:
        return state.checkpoint_path(cls.FILE)

    @classmethod
    def read(cls: type[V], state: StateDir) -> V | None:
        """The checkpoint in `state`, migrated to the current version; None if the stage has not written one."""
        document = state.read_checkpoint(cls.FILE, cls.VERSION)
        return None if document is None else cls.parse(document, cls.path(state))

    @classmethod
    def parse(cls: type[V], document: Document, path: Path) -> V:
        """A document read from `path` (any version up to VERSION) as this class."""
        return cls.from_fields(Fields(cls.migrate(document), path, cls.STAGE))

    @classmethod
    def migrate(cls, document: Document) -> Document:
        version = document.get("version")
        while isinstance(version, int) and version < cls.VERSION:
            document = cls.MIGRATIONS[version](document)
            version = document["version"]
        return document

    @classmethod
    def from_fields(cls: type[V], fields: Fields) -> V:
        raise NotImplementedError


class Checkpoint(CheckpointView):
    """A checkpoint its stage writes: to_dict gives exactly the document, keys and all, that goes to disk."""

    def to_dict(self) -> Document:
        raise NotImplementedError

    def write(self, state: StateDir) -> None:
        """Replace the stage's checkpoint atomically (data first, checkpoint last: call this after the data)."""
        state.write_checkpoint(self.FILE, self.to_dict())


class Fields:
    """The fields of one JSON object in a checkpoint, each taken with its type checked."""

    def __init__(self, document: Mapping[str, Any], path: Path, stage: str, prefix: str = "") -> None:
        self._document, self._path, self._stage, self._prefix = document, path, stage, prefix

    def text(self, name: str, default: Any = _MISSING) -> str:
        return str(self._take(name, (str,), default))

    def optional_text(self, name: str) -> str | None:
        value = self._take(name, (str, type(None)), None)
        return None if value is None else str(value)

    def integer(self, name: str, default: Any = _MISSING) -> int:
        return int(self._take(name, (int,), default))

    def number(self, name: str, default: float) -> float:
        return float(self._take(name, (float, int), default))

    def flag(self, name: str) -> bool:
        return bool(self._take(name, (bool,), _MISSING))

    def optional_list(self, name: str) -> list[Any] | None:
        value = self._take(name, (list, type(None)), None)
        return None if value is None else list(value)

    def texts(self, name: str) -> tuple[str, ...]:
        values = self._take(name, (list,), [])
        for value in values:
            if type(value) is not str:
                raise self.corrupt(f"{self._prefix}{name} = {values!r} is not a list of strings")
        return tuple(values)

    def raw(self, name: str) -> Any:
        """The JSON value as written (None if absent), for a field whose own reader checks it."""
        return self._document.get(name)

    def nested(self, name: str) -> Fields:
        return Fields(self._take(name, (dict,), _MISSING), self._path, self._stage, f"{self._prefix}{name}.")

    def optional_nested(self, name: str) -> Fields | None:
        return None if self._take(name, (dict,), None) is None else self.nested(name)

    def each(self, name: str) -> Iterator[tuple[str, Fields]]:
        """The members of an object of objects (snapshot's tables), each as Fields."""
        members = self.nested(name)
        for key in members.keys():
            yield key, members.nested(key)

    def items(self, name: str) -> Iterator[Fields]:
        """The objects of a list of objects (resnapshot's tables), each as Fields."""
        values = self._take(name, (list,), [])
        for index, value in enumerate(values):
            if not isinstance(value, dict):
                raise self.corrupt(f"{self._prefix}{name}[{index}] = {value!r} is not an object")
            yield Fields(value, self._path, self._stage, f"{self._prefix}{name}[{index}].")

    def keys(self) -> list[str]:
        return list(self._document)

    def corrupt(self, what: str) -> PositionError:
        return PositionError(
            f"checkpoint {self._path} is corrupt: {what}",
            hint=f"restore {self._path} from a backup, or remove it and start the {self._stage} stage over "
            "(cdc never guesses where to resume)",
        )

    def _take(self, name: str, kinds: tuple[type, ...], default: Any) -> Any:
        if name not in self._document:
            if default is _MISSING:
                raise self.corrupt(f"{self._prefix}{name} is missing (a {_kinds(kinds)})")
            return default
        value = self._document[name]
        # type(), not isinstance: JSON's true is no integer here, and a position is never a float.
        if type(value) not in kinds:
            raise self.corrupt(f"{self._prefix}{name} = {value!r} is not a {_kinds(kinds)}")
        return value


def _kinds(kinds: tuple[type, ...]) -> str:
    return " or ".join(_KINDS[kind] for kind in kinds)
