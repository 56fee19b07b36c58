"""MySQL option files (~/.my.cnf, --defaults-file) read as the mysql and mariadb clients read them.

The clients read options in file order, whatever the group, and follow `!include FILE` and `!includedir DIR`
(every *.cnf file of DIR, by name) where they stand: an included file's groups are its own, and the including
file goes on in the group it was in. https://mariadb.com/kb/en/configuring-mariadb-with-option-files/
What settings cdc takes from the options, TLS included, is cdc.config's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cdc.errors import ConfigError

# The groups the `mariadb` / `mysql` command-line client reads; later options override earlier ones.
CLIENT_GROUPS = frozenset({"client", "client-server", "client-mariadb", "mysql", "mariadb-client"})
# The clients stop at this depth of nested includes too: a file including itself is an error, not a hang.
MAX_DEPTH = 10
_TRUE = ("", "1", "on", "true", "yes")
_FALSE = ("0", "off", "false", "no")


@dataclass(frozen=True)
class Option:
    """One `name[=value]` line of a client group; `where` is "path:line" for messages."""

    name: str  # lower case, `_` written `-`, without a `loose-` prefix
    value: str | None
    where: str


def read_options(path: Path, groups: frozenset[str] = CLIENT_GROUPS) -> list[Option]:
    """The options of `groups` in `path` and the files it includes, in the order the client applies them."""
    found: list[Option] = []
    _read(path, groups, found, depth=0)
    return found


def flag_value(option: Option) -> bool:
    """A boolean option as the client reads it: `ssl`, `ssl=1|ON|TRUE`, `ssl=0|OFF|FALSE`."""
    value = (option.value or "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"option file {option.where}: {option.name}={option.value!r} is not a boolean",
                      hint="write 1/0, ON/OFF or TRUE/FALSE, or the option alone for ON")


def _read(path: Path, groups: frozenset[str], found: list[Option], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ConfigError(f"option file {path}: includes nested deeper than {MAX_DEPTH} (a file that includes itself?)",
                          hint="check the !include and !includedir lines")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"option file {path}: {reason}", hint="check --defaults-file and the !include lines") from None
    group: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        where = f"{path}:{number}"
        if not line or line[0] in "#;":
            continue
        if line.startswith("!"):
            _include(line, path, where, groups, found, depth)
        elif line.startswith("["):
            name, closed, rest = line[1:].partition("]")
            if not closed or (rest.strip() and rest.strip()[0] not in "#;"):  # "[client] # note" is a header
                raise ConfigError(f"option file {where}: {line!r} is not a group header", hint="write [client]")
            group = name.strip().lower()
        elif group is None:
            raise ConfigError(f"option file {where}: option {line!r} before any [group]", hint="put it under [client]")
        elif group in groups:
            found.append(_option(line, where))


def _include(line: str, path: Path, where: str, groups: frozenset[str], found: list[Option], depth: int) -> None:
    directive, _, argument = line.partition(" ")
    target = Path(argument.strip()).expanduser()
    if not target.is_absolute():
        target = path.parent / target
    if directive == "!include":
        _read(target, groups, found, depth + 1)
    elif directive == "!includedir":
        if not target.is_dir():
            # The client skips a missing directory; cdc does not: TLS settings in it would be lost silently.
            raise ConfigError(f"option file {where}: !includedir {target}: not a directory",
                              hint="create the directory or remove the line")
        for child in sorted(target.iterdir()):
            if child.suffix == ".cnf" and child.is_file():
                _read(child, groups, found, depth + 1)
    else:
        raise ConfigError(f"option file {where}: unknown directive {directive!r}", hint="use !include or !includedir")


def _option(line: str, where: str) -> Option:
    name, equals, value = line.partition("=")
    name = name.strip().lower().replace("_", "-")
    name = name.removeprefix("loose-")
    # Quotes around a value are the file's syntax, not part of it (as configparser-era cdc read them too).
    return Option(name, value.strip().strip("\"'") if equals else None, where)
