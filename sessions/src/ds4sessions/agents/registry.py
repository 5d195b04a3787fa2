"""The agent plug-ins ds4tui knows, and which one reads a given file.

Each plug-in lives in `ds4sessions.agents.<name>.agent` and exposes one class implementing
`ds4sessions.agents.base.Agent`. `PLUGINS` lists them in the order files are tried: the first
agent whose `recognizes(head)` is true reads the file.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

from ds4sessions.agents.base import Agent

#: "module:Class" of each agent plug-in, in recognition order (one line per agent).
PLUGINS: tuple[str, ...] = (
    "ds4sessions.agents.pi.agent:PiAgent",
    "ds4sessions.agents.claude.agent:ClaudeCodeAgent",
    "ds4sessions.agents.codex.agent:CodexAgent",
)

HEAD_BYTES = 64 * 1024
"""Bytes of a file's start given to `Agent.recognizes`."""


@cache
def all_agents() -> tuple[Agent, ...]:
    """One instance of every installed agent plug-in, in `PLUGINS` order.

    A plug-in whose module is not present yet is left out; any other import error propagates.
    """
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
    return tuple(agents)


def agent_named(name: str) -> Agent | None:
    """The plug-in whose `name` is `name` (e.g. "pi", "claude-code", "codex"), or None."""
    return next((a for a in all_agents() if a.name == name), None)


def _recognizes(agent: Agent, head: bytes) -> bool:
    try:
        return bool(agent.recognizes(head))
    except (ValueError, TypeError, RecursionError, UnicodeError):  # hostile bytes: not this agent's
        return False


def agent_for_head(head: bytes) -> Agent | None:
    """The first plug-in that recognizes a file starting with `head`, or None (a plug-in that fails
    on hostile bytes does not recognize them)."""
    return next((a for a in all_agents() if _recognizes(a, head)), None)


def agent_for_path(path: Path) -> Agent | None:
    """The plug-in that reads `path` (by its first `HEAD_BYTES`), or None when no agent
    recognizes it. Raises OSError when the file cannot be read."""
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
    return agent_for_head(head)
