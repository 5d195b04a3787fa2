"""The environment a user's process starts in, for benchmarks that time whole processes.

A user's Python writes each module's bytecode (`__pycache__/*.pyc`) on its first start and
reads it from then on. A sandbox or CI may set `PYTHONDONTWRITEBYTECODE=1`; then every module
whose source changed since its `.pyc` was written is compiled again at every start (~0.2 s of a
dashboard's first paint here, 89 modules). `user_env()` is the environment without it, and
`warm_bytecode()` writes the repository's own bytecode once before the timed runs, as a user's
first start does. Every timed child then reads `.pyc` files, as a user's second start does.
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (ROOT / "ds4tui", ROOT / "core" / "src", ROOT / "sessions" / "src")


def user_env(**extra: str) -> dict[str, str]:
    """`os.environ` without `PYTHONDONTWRITEBYTECODE`, with `extra` set."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra)
    return env


def warm_bytecode() -> None:
    """Write the `.pyc` of the repository's packages that are missing or stale (quietly)."""
    for folder in PACKAGES:
        compileall.compile_dir(str(folder), quiet=1, workers=1)
