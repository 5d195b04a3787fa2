#!/usr/bin/env python3
"""Regenerate the model facts of every model Claude Code and Codex name today, from LiteLLM.

Writes (never typed by hand):
- `core/src/ds4core/data/agent-models.json`: per model id: context window, max output (tokens),
  prices (USD per million tokens: input, output, cache read, 5 min / 1 h cache writes, the tier
  above N prompt tokens when LiteLLM lists one), which CLI names it, and the source and date of
  the row; a model LiteLLM does not list gets `"known": false` (shown as "window unknown");
- `core/src/ds4core/data/claude-prices.json`: the Claude rows in the shape `ds4core.claude_prices`
  has always read (`models: {id: {input, cache_write_5m, cache_write_1h, cache_read, output}}`).

Sources:
- LiteLLM's `model_prices_and_context_window_backup.json` inside the `litellm` wheel on PyPI
  (downloaded with `pip download --no-deps` into a temporary folder; litellm is not a dependency);
  `--litellm-json FILE` reads a downloaded wheel or an extracted copy instead.
- The model names: Claude Code's canonical model ids (`claude-<family>-<version>` strings of its
  bundled JS, e.g. the list `["claude-3-5-haiku", …, "claude-sonnet-5-5"]`) and Codex's bundled
  model catalog (`"slug": "…"` entries), read from the CLIs an agent-oracle run installed
  (`--deps DIR`: the folder holding `node_modules/`); without `--deps`, the names already in
  agent-models.json are kept.

    uv run python scripts/make_agent_models.py --deps /tmp/agents/deps [--litellm-json FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "core" / "src" / "ds4core" / "data"
MEMBER = "litellm/model_prices_and_context_window_backup.json"
CLAUDE_ID = re.compile(rb'"(claude-(?:opus|sonnet|haiku|fable|mythos)-\d[a-z0-9-]*|claude-3-[57]?-?(?:opus|sonnet|haiku)|claude-3-5-(?:sonnet|haiku)|claude-3-7-sonnet)(\[1m\])?"')
CODEX_SLUG = re.compile(rb'"slug": ?"([a-z0-9][a-z0-9.-]+)"')
PER_MILLION = 1_000_000


def litellm_json(path: Path | None) -> tuple[dict, str]:
    """(LiteLLM's table, "litellm <version>") from `path` or from the newest wheel on PyPI."""
    if path is not None and path.suffix == ".whl":
        with zipfile.ZipFile(path) as zf:
            return json.loads(zf.read(MEMBER)), f"litellm {path.name.split('-')[1]}"
    if path is not None:
        return json.loads(path.read_text(encoding="utf-8")), f"litellm ({path.name})"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "litellm", "-d", tmp,
                        "--quiet"], check=True)
        wheel = next(Path(tmp).glob("litellm-*.whl"))
        version = wheel.name.split("-")[1]
        with zipfile.ZipFile(wheel) as zf:
            return json.loads(zf.read(MEMBER)), f"litellm {version}"


def named_models(deps: Path | None, previous: dict) -> tuple[dict[str, set[str]], dict[str, str]]:
    """({model id: {"claude-code <v>", "codex <v>"}}, {agent: version}) from the installed CLIs."""
    named: dict[str, set[str]] = {}
    versions: dict[str, str] = {}
    if deps is None:
        for mid, row in previous.get("models", {}).items():
            named[mid] = set(row.get("namedBy", []))
        return named, dict(previous.get("source", {}).get("agents", {}))
    nm = deps / "node_modules"
    cc = json.loads((nm / "@anthropic-ai/claude-code/package.json").read_text())["version"]
    cx = json.loads((nm / "@openai/codex/package.json").read_text())["version"]
    versions = {"claude-code": cc, "codex": cx}
    for binary in glob.glob(str(nm / "@anthropic-ai/claude-code-*/claude")):
        data = Path(binary).read_bytes()
        for m in CLAUDE_ID.finditer(data):
            named.setdefault(m.group(1).decode(), set()).add(f"claude-code {cc}")
    for binary in glob.glob(str(nm / "@openai/codex-*/vendor/*/bin/codex")):
        data = Path(binary).read_bytes()
        for m in CODEX_SLUG.finditer(data):
            named.setdefault(m.group(1).decode(), set()).add(f"codex {cx}")
    return named, versions


def find_row(table: dict, model: str) -> tuple[str, dict] | None:
    """LiteLLM's row for `model`: the exact key (provider anthropic/openai first), then `<provider>/id`,
    then the newest dated key (`id-2025…`), then a cloud key whose model part is `id` (e.g.
    `anthropic.claude-opus-4-1-20250805-v1:0`). None when LiteLLM has none."""
    for key in (model, f"anthropic/{model}", f"openai/{model}"):
        row = table.get(key)
        if isinstance(row, dict) and row.get("mode", "chat") in ("chat", "responses"):
            return key, row
    dated = sorted(k for k in table if re.fullmatch(re.escape(model) + r"-20\d{6}", k))
    if dated:
        return dated[-1], table[dated[-1]]
    pattern = re.compile(r"(?:^|[./])" + re.escape(model) + r"(?:-20\d{6})?(?:-v\d+(?::\d+)?)?$")
    # the plainest priced cloud key first: priced, first-party providers, then the fewest prefixes (no region)
    cloud = sorted((k for k in table if pattern.search(k) and isinstance(table[k], dict)),
                   key=lambda k: ("input_cost_per_token" not in table[k],
                                  table[k].get("litellm_provider") not in ("anthropic", "openai"),
                                  k.count("/") + k.count("."), len(k), k))
    return (cloud[0], table[cloud[0]]) if cloud else None


def per_million(value: object) -> float | None:
    return round(float(value) * PER_MILLION, 6) if isinstance(value, (int, float)) else None


def facts(key: str, row: dict, label: str, date: str) -> dict:
    """One known row: window, max output, prices (USD per million tokens), source, date."""
    prices = {
        "input": per_million(row.get("input_cost_per_token")),
        "output": per_million(row.get("output_cost_per_token")),
        "cacheRead": per_million(row.get("cache_read_input_token_cost")),
        "cacheWrite5m": per_million(row.get("cache_creation_input_token_cost")),
        "cacheWrite1h": per_million(row.get("cache_creation_input_token_cost_above_1hr")),
    }
    out = {"known": True, "contextWindow": row.get("max_input_tokens"), "maxOutput": row.get("max_output_tokens"),
           "prices": {k: v for k, v in prices.items() if v is not None}, "provider": row.get("litellm_provider"),
           "source": f"{label} {MEMBER.split('/')[-1]}: {key}", "date": date}
    tiers = sorted({int(m.group(1)) for k in row if (m := re.fullmatch(r"input_cost_per_token_above_(\d+)k_tokens", k))})
    if tiers:
        n = tiers[0]
        tier = {"inputTokensAbove": n * 1000,
                "input": per_million(row.get(f"input_cost_per_token_above_{n}k_tokens")),
                "output": per_million(row.get(f"output_cost_per_token_above_{n}k_tokens")),
                "cacheRead": per_million(row.get(f"cache_read_input_token_cost_above_{n}k_tokens")),
                "cacheWrite5m": per_million(row.get(f"cache_creation_input_token_cost_above_{n}k_tokens"))}
        out["tiers"] = [{k: v for k, v in tier.items() if v is not None}]
    return out


def build(table: dict, label: str, named: dict[str, set[str]], versions: dict[str, str], date: str) -> dict:
    """The agent-models.json object."""
    models = {}
    for mid in sorted(named):
        found = find_row(table, mid)
        if found is None:
            row = {"known": False, "source": f"not in {label} {MEMBER.split('/')[-1]}", "date": date}
        else:
            row = facts(found[0], found[1], label, date)
        row["namedBy"] = sorted(named[mid])
        models[mid] = row
    return {"source": {"litellm": label, "file": MEMBER, "generated": date, "agents": versions,
                       "units": {"prices": "USD per million tokens", "contextWindow": "tokens", "maxOutput": "tokens"},
                       "script": "scripts/make_agent_models.py"},
            "models": models}


def claude_prices(agent_models: dict) -> dict:
    """claude-prices.json (the shape `ds4core.claude_prices` reads) from the Claude rows."""
    rows = {}
    for mid, row in agent_models["models"].items():
        p = row.get("prices") or {}
        if not mid.startswith("claude-") or not row.get("known") or "input" not in p or "output" not in p:
            continue
        rows[mid] = {"input": p["input"], "cache_write_5m": p.get("cacheWrite5m", p["input"] * 1.25),
                     "cache_write_1h": p.get("cacheWrite1h", p["input"] * 2), "cache_read": p.get("cacheRead", p["input"] * 0.1),
                     "output": p["output"]}
    src = agent_models["source"]
    return {"source": f"{src['litellm']} {src['file']} (generated by {src['script']})", "checked": src["generated"],
            "unit": "USD per million tokens",
            "note": "Matched by longest prefix of the model id, after removing a [1m] suffix. A model not listed has no price "
                    "(shown as such, never guessed).",
            "models": rows}


def main() -> None:
    """Parse arguments, build both files and write them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deps", type=Path, help="an agent-oracle deps folder (with node_modules/) holding both CLIs")
    parser.add_argument("--litellm-json", type=Path, help="a litellm-*.whl or an extracted model_prices_and_context_window*.json")
    parser.add_argument("--date", default=dt.date.today().isoformat(), help="the rows' date (default today)")
    args = parser.parse_args()
    previous_path = DATA / "agent-models.json"
    previous = json.loads(previous_path.read_text()) if previous_path.exists() else {}
    table, label = litellm_json(args.litellm_json)
    named, versions = named_models(args.deps, previous)
    out = build(table, label, named, versions, args.date)
    previous_path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    (DATA / "claude-prices.json").write_text(json.dumps(claude_prices(out), indent=1) + "\n", encoding="utf-8")
    unknown = [m for m, r in out["models"].items() if not r["known"]]
    print(f"wrote {len(out['models'])} models ({len(unknown)} unknown to {label}: {', '.join(unknown)})")


if __name__ == "__main__":
    main()
