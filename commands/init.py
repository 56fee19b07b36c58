"""`cdc init`: a wizard that asks for the connection, tables and destinations, tests them live, writes cdc.toml."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import questionary
import typer

from cdc.commands import ui
from cdc.commands.options import (
    HostOpt,
    PortOpt,
    SocketOpt,
    SslCaOpt,
    SslCertOpt,
    SslKeyOpt,
    SslModeOpt,
    UserOpt,
    complete_tables,
)
from cdc.errors import CdcError, ExitCode
from cdc.pipeline.init import (
    QUESTIONS,
    SECTIONS,
    WARN,
    Answers,
    Finding,
    Question,
    check_answers,
    check_section,
    password_from_env,
    refuse_existing,
    validate,
    write_config,
)

_Flag = Optional[str]
_Tables = Optional[list[str]]


def init(
    host: HostOpt = None,
    port: PortOpt = None,
    user: UserOpt = None,
    socket: SocketOpt = None,
    ssl_mode: SslModeOpt = None,
    ssl_ca: SslCaOpt = None,
    ssl_cert: SslCertOpt = None,
    ssl_key: SslKeyOpt = None,
    tables: Annotated[_Tables, typer.Option("--tables", help="db.table (globs allowed); repeatable or comma-separated.", autocompletion=complete_tables)] = None,
    exclude_tables: Annotated[_Tables, typer.Option("--exclude-tables", help="db.table glob to leave out; repeatable or comma-separated.", autocompletion=complete_tables)] = None,
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
    """Ask for the connection, TLS, tables and destinations, test each live, and write cdc.toml (no secrets)."""
    given = dict(host=host, port=None if port is None else str(port), user=user, socket=socket, ssl_mode=ssl_mode,
                 ssl_ca=ssl_ca, ssl_cert=ssl_cert, ssl_key=ssl_key, tables=_joined(tables),
                 exclude_tables=_joined(exclude_tables), state_dir=state_dir, bucket=bucket, prefix=prefix,
                 stream=stream, region=region, snowflake_connection=snowflake_connection,
                 snowflake_database=snowflake_database, snowflake_schema=snowflake_schema)
    answers = Answers().with_answers(given)
    refuse_existing(output, force)
    if not no_input and ui.is_tty():
        # A flag with an invalid value is asked again rather than taken as settled.
        settled = {k for k, v in given.items() if v is not None and validate(k, answers.get(k)) is None}
        answers = _wizard(answers, settled, skip_test)
    else:
        check_answers(answers)
        for section in () if skip_test else SECTIONS:
            _show(check_section(section, answers, password_from_env(dict(os.environ)), dict(os.environ)))
    write_config(output, answers, force=force)
    ui.note(f"wrote {output}; next: cdc check-binlog --config {output}")
    raise typer.Exit(int(ExitCode.OK))


def _joined(values: _Tables) -> str | None:
    return ",".join(values) if values else None


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
    check_answers(answers)  # the flags that were not asked again still get checked together (--ssl-key, ...)
    return answers


def _ask_section(section: str, answers: Answers, given: set[str]) -> Answers:
    for question in (q for q in QUESTIONS if q.section == section and q.key not in given):
        if question.asked(answers):
            answers = answers.with_answer(question.key, _ask_one(question, answers))
    return answers


def _ask_one(question: Question, answers: Answers) -> str:
    """Ask one question; Enter on an empty line keeps the current answer (shown greyed, not prefilled).

    questionary.text's `default` prefills the input buffer, so typing 3306 over a prefilled 3306 gave
    330603306 (#23); a placeholder shows the value without putting it in the buffer.
    """
    current = answers.get(question.key) or ""
    required = question.is_required(answers)
    text = _ask(questionary.text(
        f"{question.prompt}:", default="", placeholder=[("fg:ansibrightblack", current)] if current else None,
        validate=lambda v: validate(question.key, v.strip() or current, required=required) or True))
    return text.strip() or current


def _ask(prompt: questionary.Question) -> str:
    answer = prompt.ask()
    if answer is None:  # Ctrl-C: abort cleanly, nothing written
        raise typer.Abort()
    return answer


def _show(findings: list[Finding]) -> None:
    for finding in findings:
        mark = "[yellow]warn[/]" if finding.status == WARN else "[green]ok[/]"
        ui.err.print(f"{mark} {ui.escape(finding.text)}")
