"""`cdc init`: a wizard that asks for the connection, tables and destinations, tests them live, writes cdc.toml."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import questionary
import typer

from cdc.commands import ui
from cdc.errors import CdcError, ExitCode
from cdc.pipeline.init import (
    QUESTIONS,
    SECTIONS,
    Answers,
    check_answers,
    check_section,
    password_from_env,
    refuse_existing,
    validate,
    write_config,
)

_Flag = Optional[str]


def init(
    host: Annotated[_Flag, typer.Option("--host", help="MySQL host.")] = None,
    port: Annotated[_Flag, typer.Option("--port", help="MySQL port (default 3306).")] = None,
    user: Annotated[_Flag, typer.Option("--user", help="MySQL user.")] = None,
    ssl_mode: Annotated[_Flag, typer.Option(
        "--ssl-mode", help="DISABLED | PREFERRED | REQUIRED | VERIFY_CA | VERIFY_IDENTITY.")] = None,
    tables: Annotated[Optional[list[str]], typer.Option("--tables", help="db.table (globs allowed); repeatable.")] = None,
    state_dir: Annotated[_Flag, typer.Option("--state-dir", help="State directory to record (default .cdc).")] = None,
    bucket: Annotated[_Flag, typer.Option("--bucket", help="S3 bucket for ship --to s3.")] = None,
    prefix: Annotated[_Flag, typer.Option("--prefix", help="S3 key prefix (default cdc).")] = None,
    stream: Annotated[_Flag, typer.Option("--stream", help="Kinesis stream for ship --to kinesis.")] = None,
    region: Annotated[_Flag, typer.Option("--region", help="AWS region.")] = None,
    snowflake_connection: Annotated[_Flag, typer.Option("--snowflake-connection", help="Name in connections.toml.")] = None,
    snowflake_database: Annotated[_Flag, typer.Option("--snowflake-database", help="Snowflake database.")] = None,
    snowflake_schema: Annotated[_Flag, typer.Option("--snowflake-schema", help="Snowflake schema.")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write.")] = Path("cdc.toml"),
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
    no_input: Annotated[bool, typer.Option("--no-input", help="Never prompt; missing required answers exit 2.")] = False,
    skip_test: Annotated[bool, typer.Option("--skip-test", help="Do not test the answers against the servers.")] = False,
) -> None:
    """Ask for the connection, tables and destinations, test each live, and write cdc.toml (no secrets)."""
    given = dict(host=host, port=port, user=user, ssl_mode=ssl_mode, tables=",".join(tables) if tables else None,
                 state_dir=state_dir, bucket=bucket, prefix=prefix, stream=stream, region=region,
                 snowflake_connection=snowflake_connection, snowflake_database=snowflake_database,
                 snowflake_schema=snowflake_schema)
    answers = Answers(**{k: v for k, v in given.items() if v is not None})
    refuse_existing(output, force)
    if not no_input and ui.is_tty():
        answers = _wizard(answers, {k for k, v in given.items() if v is not None}, skip_test)
    else:
        check_answers(answers)
        for section in () if skip_test else SECTIONS:
            _show(check_section(section, answers, password_from_env(dict(os.environ)), dict(os.environ)))
    write_config(output, answers, force=force)
    ui.note(f"wrote {output}; next: cdc check-binlog --config {output}")
    raise typer.Exit(int(ExitCode.OK))


def _wizard(answers: Answers, given: set[str], skip_test: bool) -> Answers:
    password: str | None = password_from_env(dict(os.environ))
    for section in SECTIONS:
        while True:
            answers = _ask_section(section, answers, given)
            if section == "mysql" and password is None and not skip_test:
                password = _ask(questionary.password(f"Password for {answers.user}@{answers.host} "
                                                     "(used for the test only, never written):"))
            if skip_test:
                break
            try:
                _show(check_section(section, answers, password, dict(os.environ)))
                break
            except CdcError as exc:
                ui.error(str(exc))
                if not _ask(questionary.confirm("Change these answers?", default=True)):
                    raise
                given = given - {q.key for q in QUESTIONS if q.section == section}
    return answers


def _ask_section(section: str, answers: Answers, given: set[str]) -> Answers:
    for question in (q for q in QUESTIONS if q.section == section and q.key not in given):
        text = _ask(questionary.text(f"{question.prompt}:", default=answers.get(question.key) or "",
                                     validate=lambda v, k=question.key: validate(k, v.strip()) or True))
        answers = answers.with_answer(question.key, text)
    return answers


def _ask(prompt: questionary.Question) -> str:
    answer = prompt.ask()
    if answer is None:  # Ctrl-C: abort cleanly, nothing written
        raise typer.Abort()
    return answer


def _show(notes: list[str]) -> None:
    for note in notes:
        ui.err.print(f"[green]ok[/] {ui.escape(note)}")
