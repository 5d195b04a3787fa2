"""Sub-commands that live in their own modules, each with `register(app: typer.Typer)`.

`ds4tui.cli` calls `register_all(app)`; a module listed here that does not exist yet is skipped
(plan, cache, retrieve, steer, bridge).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import typer

MODULES = ("plan", "cache", "retrieve", "steer", "bridge", "state", "overview", "timeline")


def register_all(app: typer.Typer) -> set[str]:
    """Register every available command module on `app`; return the command names added."""
    names: set[str] = set()
    for name in MODULES:
        try:
            module = importlib.import_module(f"ds4tui.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"ds4tui.commands.{name}":
                raise
            continue
        names |= set(module.register(app))
    return names


def fail(message: str, code: int = 2) -> None:
    """Print `ds4tui: message` to stderr and exit with `code` (2: bad input)."""
    typer.echo(f"ds4tui: {message}", err=True)
    raise typer.Exit(code)


def session_file(path: Path) -> Path:
    """`path` when it names an existing regular file, or a session handle an agent plug-in
    claims (a session that is not a file, e.g. `DB#ID`: `agents.registry.agent_for_handle`)
    and can read (`agents.registry.session_stat`); otherwise a clear error and exit code 2
    (missing, unreadable, a directory, a FIFO, a device or a socket: never opened; a handle its
    plug-in cannot read, in the plug-in's words)."""
    import os

    from ds4sessions.safety import file_kind

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        from ds4sessions.agents.registry import agent_for_handle, session_stat

        if agent_for_handle(path) is not None:
            try:
                session_stat(path)  # its plug-in looks at it: one it cannot read is one line here
            except OSError as error:
                from ds4tui.errors import one_line

                fail(one_line(error))
            return path
        fail(f"{path}: no such file")
    except OSError as err:
        fail(f"{path}: {err.strerror or err}")
    if os.path.isdir(path):
        fail(f"{path}: is a directory; give a session .jsonl file")
    kind = file_kind(mode)
    if kind is not None:  # a FIFO would hang the read, /dev/zero never ends: refused by name
        fail(f"{path}: {kind}, not a session file; refused")
    return path


def agent_of(path: Path):  # type: ignore[no-untyped-def]
    """The agent plug-in that reads the session file `path` (`agents.registry.agent_for_path`,
    the one lookup every command makes); a clear error and exit 2 for a path that is no regular
    file, cannot be read, or that no agent recognizes."""
    from ds4sessions.agents.registry import agent_for_path, agent_labels

    session_file(path)
    try:
        agent = agent_for_path(path)
    except OSError as error:
        fail(f"{path}: cannot read: {error.strerror or error}")
    if agent is None:
        fail(f"{path}: not a session file of {agent_labels()}")
    return agent


def refuse_unless(agent, capability: str, command: str) -> None:  # type: ignore[no-untyped-def]
    """Exit 2 with one line when `agent` lacks `capability` (a `Capabilities` field name) for
    `command`; nothing is read further, nothing is written."""
    if getattr(agent.capabilities, capability, False):
        return
    label = getattr(agent, "label", agent.name)
    what = {"ds4_plan": "DS4's context plan", "retrieval": "DS4's historical retrieval",
            "steering": "steering"}.get(capability, capability)
    why = agent.capabilities.read_only_reason if capability == "steering" else {
        "retrieval": f"{label}'s reader keeps the context only, and DS4 retrieves what is outside it",
    }.get(capability, f"not offered for {label} sessions")
    fail(f"{command}: {what} is not available for {label} sessions: {why}")
