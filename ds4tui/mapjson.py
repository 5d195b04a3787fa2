"""`ds4tui map --json`: the map's numbers as JSON, and a start-up path that skips Typer and Rich.

`main()` is the `ds4tui` console script. For `ds4tui map --json PATH` (optionally `--fast` /
`--exact`, last one wins, as Typer reads them) on an existing file it computes and prints the
JSON itself, importing neither Typer, Rich nor the command modules (~0.2 s of start-up, issue 14);
every other command line, and every error, goes to the Typer CLI (`ds4tui.cli.main`), which
prints the same JSON through the same `map_json` / `dumps_map`. `ds4tui PATH` (or `open PATH`)
on a plain Pi session opens the dashboard without Typer too (`_fast_open_path`).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from ds4tui.mapdata import dumps_map, map_json, problem_lines, rows_json  # noqa: F401  (moved; kept importable here)

_PI_HEADER = re.compile(rb'[ \t\r\n\x0b\x0c]*\{[ \t\r\n]*"type"[ \t\r\n]*:[ \t\r\n]*"session"')
"""A file that plainly starts with a Pi session header (`{"type":"session"`, with or without
JSON whitespace, e.g. Python's `json.dumps` spacing): Claude Code and Codex files never do."""


def _fast_map_args(args: list[str]) -> tuple[Path, bool] | None:
    """(path, exact) when `args` is exactly `map` + one path + `--json` (+ `--fast`/`--exact`)
    and the path is an existing non-directory file; None for anything else."""
    parsed = _map_args(args)
    return parsed if parsed is not None and _plain_pi_file(parsed[0]) else None


def _agent_map_args(args: list[str]) -> tuple[Any, Path, bool] | None:
    """(agent, path, exact) when `args` is `map` + one path + `--json` (+ `--fast`/`--exact`) on a
    regular file that another agent than Pi reads (Claude Code, Codex, …: issue 36, ~0.3 s of
    Typer's start-up out of their `map --json`); None for anything else (the Typer CLI then
    decides, errors included)."""
    parsed = _map_args(args)
    if parsed is None:
        return None
    path, exact = parsed
    try:
        if not path.is_file():
            return None
        from ds4sessions.agents.registry import agent_for_path, default_agent

        agent = agent_for_path(path)
    except (OSError, ValueError):
        return None
    if agent is None or agent is default_agent():
        return None
    return agent, path, exact


def _map_args(args: list[str]) -> tuple[Path, bool] | None:
    """(path, exact) when `args` is exactly `map` + one path + `--json` (+ `--fast`/`--exact`,
    the last one wins, as Typer reads them); None for anything else."""
    if len(args) < 3 or args[0] != "map":
        return None
    paths = [a for a in args[1:] if not a.startswith("-")]
    flags = [a for a in args[1:] if a.startswith("-")]
    if len(paths) != 1 or "--json" not in flags or not set(flags) <= {"--json", "--fast", "--exact"}:
        return None
    exact = True
    for flag in flags:
        if flag in ("--fast", "--exact"):
            exact = flag == "--exact"
    return Path(paths[0]), exact


def _plain_pi_file(path: Path) -> bool:
    """True when `path` is an existing regular file that plainly starts with a Pi session
    header. Otherwise the Typer CLI takes over: it prints the error (and refuses FIFOs,
    devices, directories) or picks the agent (Claude Code, Codex)."""
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return _PI_HEADER.match(head) is not None


def _fast_open_path(args: list[str]) -> Path | None:
    """The path of `ds4tui PATH` or `ds4tui open PATH` when it is an existing regular file that
    plainly starts with a Pi session header or that another agent reads (it opens in the
    dashboard: `launch.run_tui`), else None (options, errors and everything else go through the
    Typer CLI)."""
    if args[:1] == ["open"]:
        args = args[1:]
    if len(args) != 1 or args[0].startswith("-") or not any(c in args[0] for c in "./"):
        return None  # (a bare word may be a command: the CLI decides; command names have no . or /)
    path = Path(args[0])
    if _plain_pi_file(path):
        return path
    # another agent's regular file (Claude Code, Codex, …): the same `run_tui` the `open` command
    # reaches (`launch.open_any`), without Typer's start-up (issue 36: ~0.15 s of the first paint)
    try:
        if not path.is_file():
            return None
        from ds4sessions.agents.registry import agent_for_path

        return path if agent_for_path(path) is not None else None
    except (OSError, ValueError):
        return None


def _load_cl100k_lean() -> None:
    """Make cl100k ready for the read, lean: in this one-shot process only (issue 14).

    The C count (`_cprep.bpe_count`: ASCII lines) needs only cl100k's ranks, which come from the
    token cache (`tokencache.cl100k_ranks`) without building tiktoken's `Encoding` (~0.08 s);
    tiktoken's encoding is then built only if a text needs it (a line with a character outside
    ASCII, a piece over 256 bytes). Without the cache or the extension: the encoding is loaded
    now, its ranks given to the C count, and tiktoken's Python copy of them dropped (~12 MiB of
    bytes keys: `Encoding` keeps it only to be pickled; encoding uses the Rust `CoreBPE`'s own
    tables), so the read reuses that memory."""
    from types import SimpleNamespace

    from ds4core.tokens import Cl100kCounter
    from ds4sessions.agents.pi.slim import use_cl100k
    from ds4sessions.tokencache import cl100k_ranks

    from ds4core import tokens

    cached = cl100k_ranks()
    if cached is not None and use_cl100k(SimpleNamespace(_pat_str=cached[0], _mergeable_ranks=cached[1])):
        loader = tokens.CL100K_LOADER
        if loader is not None:  # (an encoding built later, for a text outside ASCII, is made lean too)
            tokens.CL100K_LOADER = lambda: _lean(loader())
        return
    encoding = Cl100kCounter()._encoding
    use_cl100k(encoding)  # (the C count keeps its own copy of the ranks: ~3 MiB)
    _lean(encoding)


def _lean(encoding: Any) -> Any:
    """`encoding` without tiktoken's Python copy of its merge ranks (see `_load_cl100k_lean`)."""
    if isinstance(getattr(encoding, "_mergeable_ranks", None), dict) and encoding._mergeable_ranks:
        encoding._mergeable_ranks = {}
    return encoding


def _agent_map(agent: Any, path: Path, exact: bool) -> None:
    """`ds4tui map --json PATH` for another agent than Pi, as the Typer CLI prints it
    (`cli.map_cmd`: `dumps_map(agent.map_json(...))` and a newline), without Typer and Rich."""
    import gc

    from ds4sessions.agents.pi.discovery import load_model_table

    gc.disable()  # (a one-shot process: see `main`)
    if exact:
        _load_cl100k_lean()
    _write(dumps_map(agent.map_json(path, exact=exact, models=load_model_table())))


def _write(text: str) -> None:
    """`text` and a newline on stdout: its UTF-8 bytes when stdout is UTF-8 (the same bytes the
    text layer writes, without copies of the whole text), else through the text layer."""
    if (sys.stdout.encoding or "").lower().replace("-", "") == "utf8" and sys.stdout.errors in ("strict", "surrogateescape"):
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.write(b"\n")
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()
    sys.stderr.flush()


def main() -> None:
    """Console entry point: `map --json` directly, everything else through `ds4tui.cli.main`."""
    fast = _fast_map_args(sys.argv[1:])
    other = _agent_map_args(sys.argv[1:]) if fast is None else None
    if other is not None:
        from ds4tui.errors import run_guarded

        run_guarded(lambda: _agent_map(*other))
        os._exit(0)  # (as below: nothing to clean up)
    if fast is None:
        from ds4tui import launch

        launch.LEAN_CL100K = _load_cl100k_lean  # (this process is the `ds4tui` script's: `launch.run_tui`)
        pi_path = _fast_open_path(sys.argv[1:])
        if pi_path is not None:  # the dashboard without Typer's start-up (~0.1 s of the first paint)
            # (any agent's file: `run_tui` picks the reader by the file, as `launch.open_any`)
            from ds4tui.errors import run_guarded
            from ds4tui.launch import run_tui

            run_guarded(lambda: run_tui(pi_path, False))
            return
        from ds4tui.cli import main as cli_main

        cli_main()
        return
    from ds4tui.errors import run_guarded

    def run() -> None:
        import gc

        from ds4sessions.agents.pi.discovery import load_model_table

        # A one-shot process that makes no garbage cycles worth collecting: without the
        # collector, building the JSON of 50,000 turns skips ~140 collections (0.05 s).
        gc.disable()
        from ds4sessions.agents.pi.live import open_map_snapshot

        path, exact = fast
        if exact:
            _load_cl100k_lean()
        snap = open_map_snapshot(path, load_model_table(), exact=exact)
        data = map_json(snap)
        del snap  # nothing else needs the snapshot: its memory is reused for the text
        text = dumps_map(data)
        del data
        _write(text)

    run_guarded(run)  # any failure: one line `ds4tui: <reason>`, exit 2 (as the Typer CLI)
    # Nothing is left to clean up (no thread, no file open for writing): skip the interpreter's
    # teardown, which frees every parsed object one by one (~10 % of a 50,000-turn open).
    os._exit(0)
