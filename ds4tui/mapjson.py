"""`ds4tui map --json`: the map's numbers as JSON, and a start-up path that skips Typer and Rich.

`main()` is the `ds4tui` console script. For `ds4tui map --json PATH` (optionally `--fast` /
`--exact`, last one wins, as Typer reads them) on an existing file it computes and prints the
JSON itself, importing neither Typer, Rich nor the command modules (~0.2 s of start-up, issue 14);
every other command line, and every error, goes to the Typer CLI (`ds4tui.cli.main`), which
prints the same JSON through the same `map_json` / `dumps_map`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ds4core.categories import CategoryRow


def rows_json(rows: list[CategoryRow]) -> list[dict[str, Any]]:
    """Category rows as JSON-ready dicts (tokens as integers)."""
    return [
        {"id": r.id, "label": r.label, "tokens": r.tokens, "inferred": r.inferred,
         "children": [{"name": n, "tokens": t} for n, t in r.children]}
        for r in rows
    ]


def problem_lines(snap: Any) -> list[str]:
    """Every problem worth a user's attention, one line each: the reader's diagnostics (with
    line numbers), a torn last line, and the context builder's warnings (metadata leaf, unknown
    entry types, cycles, unpaired tool calls)."""
    lines: list[str] = []
    summary = snap.reader.diagnostics.summary()
    if summary != "no problems":
        lines += summary.splitlines()
    lines += [f"{w.kind}: {w.message}" for w in snap.context.warnings]
    return lines


def map_json(snap: Any) -> dict[str, Any]:
    """The numbers of `ds4tui map --json` for a `Snapshot`: path, model, context window, the
    preferred counter's estimate, unattributed and free tokens, the provider view, categories,
    turns (tokens by the same counter), the diagnostics count and the problem lines."""
    from ds4core.categories import calibrated

    bd = snap.best
    prov = snap.provider
    cal = calibrated(bd, prov.context_tokens if prov is not None else None)
    return {
        "agent": snap.agent,
        "path": str(snap.path),
        "model": snap.model_key,
        "contextWindow": snap.context_window,
        "estimator": bd.counter,
        "estimate": bd.estimate,
        "unattributed": bd.unattributed,
        "free": bd.free,
        "provider": None if prov is None else {
            "anchorEntryId": prov.anchor_entry_id, "promptTokens": prov.prompt_tokens,
            "contextTokens": prov.context_tokens, "estimateAtAnchor": prov.estimate_at_anchor,
            "ratio": prov.ratio, "laterMessages": prov.later_messages,
        },
        "systemInferred": snap.system_inferred,
        "categories": rows_json(bd.rows),
        "calibrated": {
            "used": cal.used, "free": cal.free, "source": cal.source, "factor": cal.factor,
            "capped": cal.capped, "categories": rows_json(cal.rows),
        },
        "turns": [
            {"index": t.index, "time": t.time.isoformat() if t.time else None, "prompt": t.prompt,
             "toolCalls": t.tool_calls, "tokens": t.tokens, "entryIds": list(t.entry_ids)}
            for t in snap.turns
        ],
        "diagnostics": snap.reader.diagnostics.total,
        "problems": problem_lines(snap),
    }


def dumps_map(data: dict[str, Any]) -> str:
    """`json.dumps(data, indent=2, ensure_ascii=False)`, the same text, written by orjson when
    that is provably equal: orjson's two-space indentation, separators, escapes and non-ASCII
    output are the stdlib's; its floats differ only in exponent notation (|x| < 1e-4 or ≥ 1e16),
    so a provider ratio outside that range, and anything orjson refuses (lone surrogates, ints
    beyond 64 bits, non-string keys), take the stdlib path. The stdlib's indenting encoder is
    pure Python (~1 s for the 10,000-turn map); orjson writes it in milliseconds."""
    ratio = (data.get("provider") or {}).get("ratio")
    factor = (data.get("calibrated") or {}).get("factor")
    if all(x is None or x == 0 or 1e-4 <= abs(x) < 1e16 for x in (ratio, factor)):
        try:
            import orjson

            return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode("utf-8")
        except (ImportError, TypeError):
            pass
    return json.dumps(data, indent=2, ensure_ascii=False)


def _fast_map_args(args: list[str]) -> tuple[Path, bool] | None:
    """(path, exact) when `args` is exactly `map` + one path + `--json` (+ `--fast`/`--exact`)
    and the path is an existing non-directory file; None for anything else."""
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
    path = Path(paths[0])
    if not path.is_file():
        return None  # the Typer CLI prints the error (and refuses FIFOs, devices, directories)
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if not head.lstrip().startswith(b'{"type":"session"'):
        return None  # not plainly a Pi session: the CLI picks the agent (Claude Code, Codex) or says why
    return path, exact


def main() -> None:
    """Console entry point: `map --json` directly, everything else through `ds4tui.cli.main`."""
    fast = _fast_map_args(sys.argv[1:])
    if fast is None:
        from ds4tui.cli import main as cli_main

        cli_main()
        return
    from ds4tui.errors import run_guarded

    def run() -> None:
        from ds4sessions.agents.pi.discovery import load_model_table
        from ds4sessions.ingest.live import open_snapshot

        path, exact = fast
        snap = open_snapshot(path, load_model_table(), exact=exact)
        sys.stdout.write(dumps_map(map_json(snap)) + "\n")
        sys.stdout.flush()
        sys.stderr.flush()

    run_guarded(run)  # any failure: one line `ds4tui: <reason>`, exit 2 (as the Typer CLI)
    # Nothing is left to clean up (no thread, no file open for writing): skip the interpreter's
    # teardown, which frees every parsed object one by one (~10 % of a 50,000-turn open).
    os._exit(0)
