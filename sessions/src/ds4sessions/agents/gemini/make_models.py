"""Regenerate `ds4core/data/gemini-models.json`: Gemini CLI's own model facts, with their source and
date, never typed by hand.

    uv run python -m ds4sessions.agents.gemini.make_models --deps /tmp/gem/deps \\
        --litellm-json litellm-1.110.2-*.whl --wire W/main/logs/fake_gemini.jsonl --wire W/extra/logs/fake_gemini_more.jsonl

What it writes (units: tokens; prices in USD per million tokens):

- `cli`: the installed `@google/gemini-cli` version, its default token limit and the limits its
  `tokenLimit(model)` switch gives (packages/core/src/core/tokenLimits.ts), the compression
  default (`DEFAULT_COMPRESSION_TOKEN_THRESHOLD`, packages/core/src/context/chatCompressionService.ts)
  and the settings schema's `model.compressionThreshold` default — read from the CLI's bundle;
- `models`: per model id the CLI names (its model constants, packages/core/src/config/models.ts, and
  every `gemini-…`/`gemma-…` literal of its core bundle that LiteLLM lists): `contextWindow` = the
  CLI's `tokenLimit` (what it compresses against and shows as "% used"), LiteLLM's
  `max_input_tokens`/`max_output_tokens` beside it, and LiteLLM's prices (`gemini/<id>`, the
  Gemini API, before the Vertex row): input, output, cache read, and the tier above 200k prompt
  tokens when listed;
- `request`: what the CLI sent beside the conversation in ds4tui's oracle runs
  (tests/fixtures/gemini/README.md): the system instruction's and each tool declaration's JSON
  size in characters, for the main agent and a subagent (the first request of each kind in the
  `--wire` logs of `fake_gemini.py`). The session file holds neither; the accounting splits the
  inferred fixed part of the prompt in these proportions.

Without `--litellm-json`, the newest `litellm` wheel is downloaded with pip (`--no-deps`) into a
temporary folder. Raises SystemExit with a message when the CLI's bundle does not have what it reads.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

MEMBER = "litellm/model_prices_and_context_window_backup.json"
PER_MILLION = 1_000_000
TOKEN_LIMITS = "// packages/core/dist/src/core/tokenLimits.js"
COMPRESSION = "// packages/core/dist/src/context/chatCompressionService.js"
MODELS = "// packages/core/dist/src/config/models.js"
MODEL_ID = re.compile(r'"((?:gemini|gemma)-\d[a-z0-9.-]*)"')


def data_path() -> Path:
    """`ds4core/data/gemini-models.json` of the ds4core this Python imports."""
    import ds4core

    return Path(ds4core.__file__).parent / "data" / "gemini-models.json"


def litellm_json(path: Path | None) -> tuple[dict[str, Any], str]:
    """(LiteLLM's table, "litellm <version>") from `path` (a wheel or the JSON) or the newest wheel."""
    if path is not None and path.suffix == ".whl":
        with zipfile.ZipFile(path) as zf:
            return json.loads(zf.read(MEMBER)), f"litellm {path.name.split('-')[1]}"
    if path is not None:
        return json.loads(path.read_text(encoding="utf-8")), f"litellm ({path.name})"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "litellm", "-d", tmp,
                        "--quiet"], check=True)
        wheel = next(Path(tmp).glob("litellm-*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            return json.loads(zf.read(MEMBER)), f"litellm {wheel.name.split('-')[1]}"


def _section(text: str, marker: str) -> str:
    """The bundle's text from `marker` to the next `// packages/` comment."""
    start = text.index(marker)
    end = text.find("\n// packages/", start + len(marker))
    return text[start:end if end > 0 else len(text)]


def cli_facts(deps: Path) -> tuple[dict[str, Any], set[str], set[str]]:
    """(the `cli` object, the CLI's model constants, every model-like literal of its core bundle)
    from the installed CLI's bundle."""
    root = deps / "node_modules" / "@google" / "gemini-cli"
    version = json.loads((root / "package.json").read_text(encoding="utf-8"))["version"]
    bundle = root / "bundle"
    entry = (bundle / "gemini.js").read_text(encoding="utf-8")
    imported = re.findall(r'from "\./(chunk-[A-Z0-9]+\.js)"|import "\./(chunk-[A-Z0-9]+\.js)"', entry)
    names = [a or b for a, b in imported]
    core = next((bundle / n for n in names if TOKEN_LIMITS in (bundle / n).read_text(encoding="utf-8")), None)
    if core is None:
        raise SystemExit(f"no {TOKEN_LIMITS} in the chunks {bundle / 'gemini.js'} imports")
    text = core.read_text(encoding="utf-8")
    models_text = _section(text, MODELS)
    constants = dict(re.findall(r'^var ([A-Z0-9_]+) = "([^"]+)";', models_text, re.M))
    for name, other in re.findall(r"^var ([A-Z0-9_]+) = ([A-Z0-9_]+);", models_text, re.M):  # (aliases)
        if other in constants:
            constants[name] = constants[other]
    limits_text = _section(text, TOKEN_LIMITS)
    numbers = {k: int(float(v)) for k, v in re.findall(r"^var ([A-Z0-9_]+) = ([0-9.e]+);", limits_text, re.M)}
    default = numbers["DEFAULT_TOKEN_LIMIT"]
    limits: dict[str, int] = {}
    cases: list[str] = []
    for line in limits_text.splitlines():
        line = line.strip()
        if m := re.match(r"case ([A-Z0-9_]+):", line):
            cases.append(m.group(1))
        elif m := re.match(r"return ([A-Z0-9_]+|\d+);", line):
            value = numbers.get(m.group(1)) if not m.group(1).isdigit() else int(m.group(1))
            for case in cases:
                if case in constants and value is not None:
                    limits[constants[case]] = value
            cases = []
    compression = re.search(r"var DEFAULT_COMPRESSION_TOKEN_THRESHOLD = ([0-9.]+);", _section(text, COMPRESSION))
    if compression is None:
        raise SystemExit("no DEFAULT_COMPRESSION_TOKEN_THRESHOLD in the CLI's bundle")
    defaults = {float(m.group(1)) for other in sorted(bundle.glob("*.js"))
                if (m := re.search(r"compressionThreshold: \{[^}]*?default: ([0-9.]+),", other.read_text(encoding="utf-8"), re.S))}
    if len(defaults) != 1:
        raise SystemExit(f"the settings schema's model.compressionThreshold default: {sorted(defaults) or 'not found'}")
    schema_default = defaults.pop()
    own = {v for k, v in constants.items() if k.endswith("_MODEL") and v != "none"}
    cli = {"package": "@google/gemini-cli", "version": version, "defaultTokenLimit": default, "tokenLimits": limits,
           "tokenLimitsSource": "packages/core/src/core/tokenLimits.ts tokenLimit()",
           "compressionThresholdDefault": float(compression.group(1)),
           "compressionThresholdSource": "packages/core/src/context/chatCompressionService.ts DEFAULT_COMPRESSION_TOKEN_THRESHOLD",
           "settingsSchemaDefault": schema_default}
    return cli, own, set(MODEL_ID.findall(text))


def find_row(table: dict[str, Any], model: str) -> tuple[str, dict[str, Any]] | None:
    """LiteLLM's chat row for `model`: `gemini/<id>` (the Gemini API) first, then `<id>` (Vertex)."""
    for key in (f"gemini/{model}", model, f"vertex_ai/{model}"):
        row = table.get(key)
        if isinstance(row, dict) and row.get("mode", "chat") == "chat":
            return key, row
    return None


def per_million(value: Any) -> float | None:
    return round(float(value) * PER_MILLION, 6) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def model_row(model: str, cli: dict[str, Any], table: dict[str, Any], label: str, date: str) -> dict[str, Any]:
    """One model's facts: the CLI's window, LiteLLM's prices when it lists the model."""
    window = cli["tokenLimits"].get(model, cli["defaultTokenLimit"])
    found = find_row(table, model)
    out: dict[str, Any] = {"contextWindow": window, "windowSource": f"{cli['package']} {cli['version']} tokenLimit()"}
    if found is None:
        out.update(known=False, priceSource=f"not in {label}")
        return out
    key, row = found
    prices = {"input": per_million(row.get("input_cost_per_token")), "output": per_million(row.get("output_cost_per_token")),
              "cacheRead": per_million(row.get("cache_read_input_token_cost"))}
    out.update(known=True, litellmWindow=row.get("max_input_tokens"), maxOutput=row.get("max_output_tokens"),
               prices={k: v for k, v in prices.items() if v is not None}, priceSource=f"{label} {MEMBER.split('/')[-1]}: {key}",
               date=date)
    tiers = sorted({int(m.group(1)) for k in row if (m := re.fullmatch(r"input_cost_per_token_above_(\d+)k_tokens", k))})
    if tiers and row.get(f"input_cost_per_token_above_{tiers[0]}k_tokens") is not None:
        n = tiers[0]
        tier = {"inputTokensAbove": n * 1000, "input": per_million(row.get(f"input_cost_per_token_above_{n}k_tokens")),
                "output": per_million(row.get(f"output_cost_per_token_above_{n}k_tokens")),
                "cacheRead": per_million(row.get(f"cache_read_input_token_cost_above_{n}k_tokens"))}
        out["tiers"] = [{k: v for k, v in tier.items() if v is not None}]
    return out


def request_shapes(wires: list[Path], version: str) -> dict[str, Any]:
    """The system instruction's and tool declarations' JSON sizes (characters) of the first main
    and the first subagent `streamGenerateContent` request in the fake's logs."""
    shapes: dict[str, Any] = {}
    for wire in wires:
        for line in wire.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            body = row.get("body")
            if not isinstance(body, dict) or ":streamGenerateContent" not in row.get("path", ""):
                continue
            tools = [fd for t in body.get("tools") or [] for fd in t.get("functionDeclarations") or []]
            kind = "subagent" if any(fd.get("name") == "complete_task" for fd in tools) else "main"
            if kind in shapes:
                continue
            shapes[kind] = {"systemInstructionChars": len(json.dumps(body.get("systemInstruction"), ensure_ascii=False)),
                            "toolDeclarations": {fd["name"]: len(json.dumps(fd, ensure_ascii=False)) for fd in tools},
                            "source": f"{wire.name}: the first {kind} request of ds4tui's oracle run"}
    return {"cli": version, "unit": "characters of JSON", **shapes}


def main() -> None:
    """Parse the arguments, build the table and write it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deps", type=Path, required=True, help="a folder holding node_modules/@google/gemini-cli")
    parser.add_argument("--litellm-json", type=Path, help="a litellm-*.whl or an extracted model_prices_and_context_window*.json")
    parser.add_argument("--wire", type=Path, action="append", default=[], help="a fake_gemini.py log of an oracle run")
    parser.add_argument("--date", default=dt.date.today().isoformat(), help="the rows' date (default today)")
    parser.add_argument("--out", type=Path, default=None, help="default: ds4core/data/gemini-models.json")
    args = parser.parse_args()
    cli, own, literals = cli_facts(args.deps)
    table, label = litellm_json(args.litellm_json)
    models = {}
    for model in sorted(own | literals):
        row = model_row(model, cli, table, label, args.date)
        if (row.get("known") or model in own):  # (a literal LiteLLM does not list is no model)
            models[model] = row
    out = {"source": {"cli": f"{cli['package']} {cli['version']}", "litellm": label, "file": MEMBER, "generated": args.date,
                      "script": "python -m ds4sessions.agents.gemini.make_models",
                      "units": {"contextWindow": "tokens", "prices": "USD per million tokens"}},
           "cli": cli, "models": models, "request": request_shapes(args.wire, cli["version"])}
    path = args.out or data_path()
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    unknown = sorted(m for m, r in models.items() if not r.get("known"))
    print(f"wrote {path}: {len(models)} models ({len(unknown)} without a LiteLLM price: {', '.join(unknown) or 'none'})")


if __name__ == "__main__":
    main()
