"""The README's "Commands" block names every command and sub-command of `ds4tui --help`."""

from __future__ import annotations

import re

import typer

from tests.conftest import ROOT


def _commands_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Commands\n"):]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert blocks, "no ```sh block under ## Commands"
    return "\n".join(blocks)


def test_every_command_is_in_the_readme() -> None:
    from ds4tui.cli import app

    block = _commands_block()
    group = typer.main.get_command(app)
    assert len(group.commands) > 10  # type: ignore[attr-defined]
    missing = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        if command.hidden:
            continue
        if not re.search(rf"ds4tui (\[)?{re.escape(name)}\b", block):
            missing.append(name)
        for sub in getattr(command, "commands", {}):
            if not re.search(rf"\b{re.escape(name)} {re.escape(sub)}\b", block):
                missing.append(f"{name} {sub}")
    assert missing == []
