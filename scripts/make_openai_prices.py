"""Write core/src/ds4core/data/openai-prices.json: OpenAI list prices for Codex sessions.

Source: the bundled model table (`ds4core/data/models.json`, itself generated from
@earendil-works/pi-ai's provider data), entries `openai/<model>`. Units: USD per million tokens.
Run: `uv run python scripts/make_openai_prices.py`.
"""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "core" / "src" / "ds4core" / "data"

table = json.loads((DATA / "models.json").read_text())
models = {}
for key, spec in sorted(table["models"].items()):
    provider, _, model = key.partition("/")
    if provider != "openai":
        continue
    cost = spec.get("cost") or {}
    entry = {k: cost.get(k, 0) for k in ("input", "cacheRead", "cacheWrite", "output")}
    if cost.get("tiers"):
        entry["tiers"] = cost["tiers"]
    entry["contextWindow"] = spec.get("contextWindow")
    models[model] = entry
out = {
    "source": {
        "from": "ds4core/data/models.json entries openai/*",
        "upstream": table["source"],
        "date": table["source"].get("generated"),
        "units": {"price": "USD per million tokens", "contextWindow": "tokens"},
        "note": "OpenAI list prices; cacheRead applies to cached input; a tier applies when the prompt exceeds inputTokensAbove",
    },
    "models": models,
}
(DATA / "openai-prices.json").write_text(json.dumps(out, indent=1) + "\n")
print(len(models), "models")
