"""A snapshot's map numbers as plain data (`ds4tui map --json` and the category rows), for
every agent: pure, importing neither Typer, Rich nor the app, so the console script's fast path
(`ds4tui.mapjson`), the CLI, the agent plug-ins (`agents.plugin.ConversationAgent.map_json`) and
the renderers share it."""

from __future__ import annotations

import json
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
    line numbers), a torn last line, the context builder's warnings (metadata leaf, unknown
    entry types, cycles, unpaired tool calls) and the agent's own (`Snapshot.problems`)."""
    return list(snap.problems)


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
        "turns": turn_rows(snap.turns),
        "diagnostics": snap.reader.diagnostics.total,
        "problems": problem_lines(snap),
        **({"extras": snap.extras.to_json()} if snap.extras is not None else {}),
    }


def turn_rows(turns: Any) -> list[dict[str, Any]]:
    """The "turns" of `map_json`: per `Turn`, {"index", "time" (ISO 8601 with the offset, or
    None), "prompt", "toolCalls", "tokens", "entryIds"}. Made in C when the extension is built
    (`_cprep.turn_rows`: 50,000 turns in ~0.03 s instead of ~0.1 s), the same dicts."""
    from ds4sessions.agents.pi.slim import _cprep
    from ds4sessions.ingest.snapshot import Turn

    if _cprep is not None and type(turns) in (tuple, list):
        return _cprep.turn_rows(turns, Turn)  # type: ignore[no-any-return]
    return [
        {"index": t.index, "time": t.time.isoformat() if t.time else None, "prompt": t.prompt,
         "toolCalls": t.tool_calls, "tokens": t.tokens, "entryIds": list(t.entry_ids)}
        for t in turns
    ]


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
