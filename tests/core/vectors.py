"""Loading the DS4 vectors of `../shared/ds4-vectors/` (spec §9) for parametrised tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import SHARED


def case_names(vectors: str) -> list[str]:
    """The case names of one vector file (ids for `parametrize`); a placeholder that the
    `shared_dir` fixture then skips when the shared folder is absent."""
    if SHARED is None:
        return ["(shared folder absent)"]
    data = json.loads((SHARED / vectors).read_text(encoding="utf-8"))
    return [case["name"] for case in data["cases"]]


def load_cases(shared_dir: Path, vectors: str) -> dict[str, dict[str, Any]]:
    """Case name → case of one vector file."""
    data = json.loads((shared_dir / vectors).read_text(encoding="utf-8"))
    return {case["name"]: case for case in data["cases"]}


def expand(value: Any) -> Any:
    """The vectors' `messageSpec`: `{"$text": [prefix, char, count, suffix?]}` → a string."""
    if isinstance(value, dict):
        if set(value) == {"$text"}:
            prefix, char, count, *suffix = value["$text"]
            return prefix + char * count + (suffix[0] if suffix else "")
        return {key: expand(item) for key, item in value.items()}
    if isinstance(value, list):
        return [expand(item) for item in value]
    return value
