#!/usr/bin/env python3
"""Regenerate ds4core's bundled model table from Pi's own model catalog.

Source: the npm package `@earendil-works/pi-ai`, files `dist/providers/data/<provider>.json`
(object `api -> "chat:<id>" -> model`). The script fetches the package tarball with `npm pack`,
keeps only the fields ds4tui uses (context window, max output, prices in USD per million tokens,
price tiers, prompt-cache lifetimes in seconds, input kinds, reasoning) and writes
`core/src/ds4core/data/models.json`, recording the package version and the generation date.

    uv run python scripts/build_model_table.py [--version 1.6.0] [--from-dir DIR]

`--from-dir` reads an already unpacked `package/` directory instead of calling npm.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "@earendil-works/pi-ai"
OUT = Path(__file__).resolve().parents[1] / "core" / "src" / "ds4core" / "data" / "models.json"
KEEP = ("name", "api", "contextWindow", "maxTokens", "reasoning", "input", "cost", "promptCache")


def unpack(version: str, workdir: Path) -> Path:
    """Fetch `PACKAGE@version` with `npm pack` into workdir and return its `package/` dir."""
    out = subprocess.run(
        ["npm", "pack", f"{PACKAGE}@{version}", "--silent"],
        cwd=workdir, check=True, capture_output=True, text=True,
    )
    tgz = workdir / out.stdout.strip().splitlines()[-1]
    with tarfile.open(tgz) as tar:
        tar.extractall(workdir, filter="data")
    return workdir / "package"


def build(package_dir: Path) -> dict:
    """Return the table: {"source": {...}, "models": {"provider/id": {...}}} (sorted keys)."""
    meta = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
    models: dict[str, dict] = {}
    for data_file in sorted((package_dir / "dist" / "providers" / "data").glob("*.json")):
        catalog = json.loads(data_file.read_text(encoding="utf-8"))
        for per_api in catalog.values():
            if not isinstance(per_api, dict):
                continue
            for model in per_api.values():
                if not isinstance(model, dict) or "id" not in model or "provider" not in model:
                    continue
                key = f"{model['provider']}/{model['id']}"
                models.setdefault(key, {k: model[k] for k in KEEP if k in model})
    return {
        "source": {
            "package": PACKAGE,
            "version": meta["version"],
            "files": "dist/providers/data/*.json",
            "generated": dt.date.today().isoformat(),
            "units": {"cost": "USD per million tokens", "promptCache": "seconds", "contextWindow": "tokens"},
        },
        "models": dict(sorted(models.items())),
    }


def main() -> None:
    """Parse arguments, build the table and write it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="1.6.0", help="pi-ai version to read (default 1.6.0)")
    parser.add_argument("--from-dir", type=Path, help="an unpacked package/ directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        package_dir = args.from_dir or unpack(args.version, Path(tmp))
        table = build(package_dir)
    OUT.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT} with {len(table['models'])} models from {PACKAGE} {table['source']['version']}")


if __name__ == "__main__":
    main()
