"""docs/mqadmin.md's command table says what a user may type: each option it lists (``-x longName``, ``R`` for a
required one, ``(flag)`` for one without a value) must be that command's option, under both names, as listed."""

from __future__ import annotations

import re
from pathlib import Path

import click

from client.mqadmin import main as mqadmin

DOC = Path(__file__).resolve().parents[2] / "docs" / "mqadmin.md"
ROW = re.compile(r"\| `(\w+)`[^|]*\| (.*?) \| ")
OPTION = re.compile(r"(R )?`(-\w) (\w+)`( \(flag\))?")


def _documented() -> list[tuple[str, str, str, bool, bool]]:
    rows = [ROW.match(line) for line in DOC.read_text(encoding="utf-8").splitlines()]
    return [
        (row[1], short, long, bool(required), bool(flag))
        for row in rows
        if row
        for required, short, long, flag in OPTION.findall(row[2])
    ]


def _option(command: click.Command, short: str) -> click.Parameter | None:
    return next((param for param in command.params if short in param.opts), None)


def test_every_option_of_the_command_table_is_the_commands_own() -> None:
    documented = _documented()
    assert len(documented) > 150  # the table was read
    wrong = []
    for name, short, long, required, flag in documented:
        command = mqadmin.commands.get(name)
        param = _option(command, short) if command else None
        if param is None:
            wrong.append(f"{name} {short}: no such option")
            continue
        if f"--{long}" not in param.opts:
            wrong.append(f"{name} {short} {long}: the option is {param.opts}")
        is_flag = bool(getattr(param, "is_flag", False))
        if required != param.required or (flag and not is_flag):
            wrong.append(f"{name} {short} {long}: required={param.required}, flag={is_flag}")
    assert wrong == []
