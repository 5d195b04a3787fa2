"""Sub-commands that live in their own modules, each with `register(app: typer.Typer)`.

`ds4tui.cli` calls `register_all(app)`; a module listed here that does not exist yet is skipped
(modules are added by the issues that build them: plan, cache, retrieve, steer).
"""

from __future__ import annotations

import importlib

import typer

MODULES = ("plan", "cache", "retrieve", "steer")


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
