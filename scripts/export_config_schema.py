#!/usr/bin/env python3
"""Export the JSON schema of DS4's `ds4-context.json` (the `ds4core.config.Ds4Config` models).

    uv run python scripts/export_config_schema.py           # write docs/ds4-config.schema.json
    uv run python scripts/export_config_schema.py --check   # exit 1 when the file is stale

The schema describes what ds4tui reads (DS4's JSON names, 0.3.7 defaults). DS4 itself is more
lenient than a schema validator: unknown keys and wrong-typed values are ignored with a warning
(see `ds4core.config`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ds4core.config import Ds4Config

OUT = Path(__file__).resolve().parents[1] / "docs" / "ds4-config.schema.json"


def render() -> str:
    """The schema as the committed file's text (2-space indent, trailing newline)."""
    schema = Ds4Config.model_json_schema(by_alias=True)
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "ds4-context.json",
        **schema,
        "title": "DS4 context engine configuration (ds4-context.json)",
    }
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    """Write the schema, or with `--check` compare it with the committed file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when docs/ds4-config.schema.json is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is stale; run scripts/export_config_schema.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
