"""The prompt-cache retention a user assumes for agents whose sessions record none: one setting.

`DS4TUI_CACHE_RETENTION="codex=300"` (comma-separated `agent=seconds`, agent names as in
`ds4sessions.agents.base`, e.g. `codex=300,gemini=600`). An agent with an entry gets a prompt-cache
countdown labelled "typical, not recorded" everywhere ds4tui shows one (the home screen,
`ds4tui sessions`, `ds4tui cache`, the Codex view); one without has no countdown. Codex records no
cache TTL or expiry (peers-and-features.md §2.11), so only a configured value can give one.

`DS4TUI_CODEX_CACHE_RETENTION=300` (seconds, Codex only) is the older name: still read when the
new setting has no `codex` entry, with a deprecation note (`Retention.notes`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

ENV = "DS4TUI_CACHE_RETENTION"
"""The setting's environment variable."""

DEPRECATED_PREFIX, DEPRECATED_SUFFIX = "DS4TUI_", "_CACHE_RETENTION"
"""Older per-agent names, `DS4TUI_<AGENT>_CACHE_RETENTION` (seconds; `<AGENT>` the agent id in
upper case, `-` as `_`: the Codex view read `DS4TUI_CODEX_CACHE_RETENTION`), read when `ENV` has
no entry for that agent."""


def deprecated_names(env: Mapping[str, str]) -> dict[str, str]:
    """Agent id → the older per-agent variable set in `env` (`DEPRECATED_PREFIX`…)."""
    out = {}
    for key in env:
        if key.startswith(DEPRECATED_PREFIX) and key.endswith(DEPRECATED_SUFFIX) and key != ENV:
            middle = key[len(DEPRECATED_PREFIX):-len(DEPRECATED_SUFFIX)]
            if middle:
                out[middle.lower().replace("_", "-")] = key
    return out


def parse_retention(text: str | None) -> dict[str, int]:
    """`"codex=300,pi=3600"` → {"codex": 300, "pi": 3600} (seconds, > 0); bad parts are ignored."""
    out: dict[str, int] = {}
    for part in (text or "").split(","):
        name, _, value = part.partition("=")
        try:
            seconds = int(float(value))
        except (ValueError, OverflowError):
            continue
        if name.strip() and seconds > 0:
            out[name.strip()] = seconds
    return out


@dataclass(frozen=True)
class Retention:
    """The configured retention: `seconds` by agent name, and `notes` (one line each: a
    deprecated name in use, a value that could not be read)."""

    seconds: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def get(self, agent: str) -> int | None:
        """The retention of `agent` in seconds, None when none is configured."""
        return self.seconds.get(agent)


def retention_from_env(environ: Mapping[str, str] | None = None) -> Retention:
    """The setting from `environ` (default `os.environ`): `ENV`, plus each deprecated per-agent
    name for an agent `ENV` does not name (a note says to move it)."""
    env = os.environ if environ is None else environ
    seconds = parse_retention(env.get(ENV))
    notes: list[str] = []
    for agent, old in deprecated_names(env).items():
        raw = env.get(old)
        if not raw:
            continue
        if agent in seconds:
            notes.append(f"{old} is deprecated and ignored: {ENV} sets {agent}")
            continue
        value = parse_retention(f"{agent}={raw}").get(agent)
        if value is None:
            notes.append(f"{old}={raw!r} is not a number of seconds; ignored")
            continue
        seconds[agent] = value
        notes.append(f"{old} is deprecated: use {ENV}={agent}={value}")
    return Retention(seconds, tuple(notes))
