"""The agent plug-ins ds4tui knows, and which one reads a given file: the one lookup the
dashboard, `home` and every CLI command use (issue 28: "One lookup, `agent_for_path`").

Each plug-in lives in `ds4sessions.agents.<name>.agent` and exposes one class implementing
`ds4sessions.agents.base.Agent` (most subclass `ds4sessions.agents.plugin.ConversationAgent`).
`PLUGINS` lists them in the order files are tried; a package installed beside ds4tui adds its own
under the entry-point group `ds4tui.agents` (`name = "module:Class"`, as harlequin loads its
adapters), tried after them. A file is read by the first agent whose `recognizes(head)` is true;
when none recognizes it, by the first whose `claims(head)` is (a damaged file of its own: Pi
claims an empty file and a torn or corrupt header, bad input B02); else by none.

A session that is not a file of its own (e.g. one row of a database) is named by a *handle*, a
path-like text such as `DB#ID`: a path that is no existing file goes to the first plug-in whose
optional `claims_handle(text)` is true (`agent_for_handle`). Such a plug-in also says which files
to watch for it (`handle_files(text)`), its size and modification time (`handle_stat(text)`), and
reads it with its own tailer (`tailer(path)`, the interface of `ingest.tailer.Tailer`);
`watched_files`, `session_stat` and `tailer_for` answer for files and handles alike.
"""

from __future__ import annotations

import importlib
import os
import sys
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from ds4sessions.agents.base import Agent

#: "module:Class" of each agent plug-in, in recognition order (one line per agent).
PLUGINS: tuple[str, ...] = (
    "ds4sessions.agents.pi.agent:PiAgent",
    "ds4sessions.agents.claude.agent:ClaudeCodeAgent",
    "ds4sessions.agents.codex.agent:CodexAgent",
    "ds4sessions.agents.gemini.agent:GeminiCliAgent",
    "ds4sessions.agents.opencode.agent:OpenCodeAgent",
)

HEAD_BYTES = 64 * 1024
"""Bytes of a file's start given to `Agent.recognizes`."""

ENTRY_POINT_GROUP = "ds4tui.agents"
"""The entry-point group third-party agent plug-ins register under (`module:Class`)."""


@cache
def all_agents() -> tuple[Agent, ...]:
    """One instance of every installed agent plug-in: `PLUGINS` in order, then the entry points
    of `ENTRY_POINT_GROUP` (by name). A plug-in whose module is not present is left out; a
    third-party plug-in that fails to load is left out with one line on stderr (ds4tui still
    starts); an error in a bundled plug-in propagates."""
    agents: list[Agent] = []
    for spec in PLUGINS:
        module_name, _, class_name = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and module_name.startswith(error.name):
                continue
            raise
        agents.append(getattr(module, class_name)())
    names = {a.name for a in agents}
    for entry in _entry_points():
        try:
            agent = entry.load()()
        except Exception as error:  # a broken third-party plug-in must not take ds4tui down
            print(f"ds4tui: agent plug-in {entry.name} ({entry.value}) not loaded: {type(error).__name__}: {error}",
                  file=sys.stderr)
            continue
        if getattr(agent, "name", None) in names:
            continue  # (a bundled agent of the same name wins)
        names.add(agent.name)
        agents.append(agent)
    return tuple(agents)


def _entry_points() -> list:  # type: ignore[type-arg]
    from importlib.metadata import entry_points

    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)


def default_agent() -> Agent:
    """The agent of a file that does not exist yet (the dashboard waits for it to appear):
    the first plug-in (Pi)."""
    return all_agents()[0]


def agent_named(name: str) -> Agent | None:
    """The plug-in whose `name` is `name` (e.g. "pi", "claude-code", "codex"), or None."""
    return next((a for a in all_agents() if a.name == name), None)


def _asks(agent: Agent, method: str, head: bytes) -> bool:
    ask = getattr(agent, method, None)
    if ask is None:
        return False
    try:
        return bool(ask(head))
    except (ValueError, TypeError, RecursionError, UnicodeError):  # hostile bytes: not this agent's
        return False


def agent_for_head(head: bytes) -> Agent | None:
    """The first plug-in that recognizes a file starting with `head`, else the first that claims
    it (`Agent.claims`: a damaged file of its own), else None. A plug-in that fails on hostile
    bytes does neither."""
    agents = all_agents()
    found = next((a for a in agents if _asks(a, "recognizes", head)), None)
    return found if found is not None else next((a for a in agents if _asks(a, "claims", head)), None)


def agent_for_handle(text: str | Path) -> Agent | None:
    """The first plug-in whose `claims_handle(text)` is true (a session that is not a file, named
    e.g. `DB#ID`), else None. Asks only about a path that is not an existing file (a file is
    read by its head); a plug-in that fails on the text claims nothing."""
    text = os.fspath(text)
    try:
        if os.path.lexists(text):
            return None
    except (ValueError, OSError):  # an embedded NUL, a name too long: no file, and no handle either
        return None
    for agent in all_agents():
        claims = getattr(agent, "claims_handle", None)
        if claims is None:
            continue
        try:
            if claims(text):
                return agent
        except (ValueError, TypeError, RecursionError, UnicodeError):
            continue
    return None


def agent_for_path(path: Path) -> Agent | None:
    """The plug-in that reads `path`: the one that claims it as a handle (`agent_for_handle`),
    else by its first `HEAD_BYTES`; None when no agent recognizes or claims it. Raises OSError
    when the file cannot be read."""
    handler = agent_for_handle(path)
    if handler is not None:
        return handler
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
    return agent_for_head(head)


def watched_files(path: Path) -> tuple[Path, ...]:
    """The files whose changes may change the session at `path`: `(path,)` for a session file,
    the plug-in's `handle_files(text)` for a handle (e.g. a database and its write-ahead log)."""
    agent = agent_for_handle(path)
    files = getattr(agent, "handle_files", None) if agent is not None else None
    return tuple(Path(f) for f in files(os.fspath(path))) if files is not None else (Path(path),)


class HandleStat(NamedTuple):
    """What `session_stat` says of a handle: its size (bytes or the plug-in's unit of size, as
    its `SessionInfo.size`) and modification time (Unix seconds), the two fields of
    `os.stat_result` the overview compares."""

    st_size: int
    st_mtime: float


def session_stat(path: Path | str) -> Any:
    """`os.stat(path)` for a session file; for a handle, the plug-in's `handle_stat(text)` as a
    `HandleStat`. Raises OSError: FileNotFoundError for a handle whose session is gone (the
    plug-in returned None), or the plug-in's own one-line error (e.g. a database it cannot read)."""
    agent = agent_for_handle(path)
    stat = getattr(agent, "handle_stat", None) if agent is not None else None
    if stat is None:
        return os.stat(path)
    found = stat(os.fspath(path))
    if found is None:
        raise FileNotFoundError(2, "no such session", os.fspath(path))
    return HandleStat(int(found[0]), float(found[1]))


def tailer_for(agent: Agent, path: Path, cap: int | None = None) -> Any:
    """The source of `path`'s lines for `agent`'s reader: the agent's own `tailer(path)` when it
    has one (a session that is not a file), else `ingest.tailer.Tailer(path, cap=cap)`."""
    own = getattr(agent, "tailer", None)
    if own is not None:
        return own(Path(path))
    from ds4sessions.ingest.tailer import Tailer

    return Tailer(Path(path), cap=cap)


def agent_labels() -> str:
    """"Pi, Claude Code or Codex": the installed agents' labels, for "not a session" messages."""
    labels = [getattr(a, "label", a.name) for a in all_agents()]
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " or " + labels[-1]
