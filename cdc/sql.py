"""SQL text: a Jinja2 environment over the `templates` package, and identifier quoting.

Templates are found through importlib.resources, so the same code works in a checkout and in an
installed wheel (templates are package data). StrictUndefined turns a misspelt variable into an
error instead of an empty string in a statement.
"""

from __future__ import annotations

import functools
from importlib import resources

import jinja2


def quote_ident(name: str) -> str:
    """A Snowflake (and ANSI) quoted identifier: "name", with embedded double quotes doubled."""
    if not name:
        raise ValueError("an identifier cannot be empty")
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """A single-quoted string literal, for object names and paths inside DDL only.

    Row values never go through here: they travel in Parquet files or as bind parameters.
    """
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _load(name: str) -> str | None:
    try:
        return resources.files("cdc.templates").joinpath(*name.split("/")).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The shared template environment (no autoescape: the output is SQL, quoted in Python)."""
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters["ident"] = quote_ident
    env.filters["literal"] = quote_literal
    return env


def render(template: str, **context: object) -> str:
    """Render `templates/<template>` and strip surrounding blank lines."""
    return environment().get_template(template).render(**context).strip()


def template_names(prefix: str) -> list[str]:
    """Every template under `templates/<prefix>/` (for tests that render them all)."""
    folder = resources.files("cdc.templates").joinpath(prefix)
    return sorted(f"{prefix}/{entry.name}" for entry in folder.iterdir() if entry.name.endswith(".j2"))
