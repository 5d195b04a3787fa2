"""Issue 13: property fuzzing of every agent ds4tui reads: reader → context → plan → cache →
retrieval → JSON, on mutated real sessions. No stage may raise (the pipeline's `errors` stay
empty), the output must encode as UTF-8 JSON, and the read must finish.

Budget: the `ci` hypothesis profile (a fixed, small number of examples) by default;
`DS4TUI_FUZZ=long` runs the `long` profile (thousands of examples) on demand.

Adding an agent is one line in `AGENTS`: a name and a seed session file (the agent registry
picks the reader from the file).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds4sessions.derive.pipeline import Derived, SessionPipeline
from ds4sessions.agents.pi.live import Snapshot

from tests.conftest import FIXTURES

settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.register_profile("long", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
PROFILE = "long" if os.environ.get("DS4TUI_FUZZ") == "long" else "ci"

AGENTS: dict[str, Path] = {
    "pi": FIXTURES / "pi" / "01-tools-and-image.jsonl",
    "claude-code": FIXTURES / "claude" / "manual-compact-diagnostics.jsonl",
    "codex": FIXTURES / 'codex/sample/sessions/2026/12/02/rollout-2026-12-02T01-10-23-01a2344d-7ef9-7e61-a841-8556539ac489.jsonl',
}

HOSTILE = st.one_of(
    st.sampled_from([2**70, -2**70, 1e308, -1e308, 10**19, -1, 0, 1.5, True, False, None, "", "\ud800", "\udfff x",
                     "+275760-09-13T00:00:00.001Z", "0000-00-00", [], {}, [1, [2, [3]]], {"a": {"b": {}}}]),
    st.integers(), st.floats(allow_nan=False), st.text(max_size=20),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3), st.lists(st.integers(), max_size=3),
)


def _nodes(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path (keys / indexes) to a value inside `value`, the root excluded."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append(path + (k,))
            out.extend(_nodes(v, path + (k,)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append(path + (i,))
            out.extend(_nodes(v, path + (i,)))
    return out


def _set(root: Any, path: tuple, value: Any, delete: bool) -> None:
    for key in path[:-1]:
        root = root[key]
    if delete:
        del root[path[-1]]
    else:
        root[path[-1]] = value


@st.composite
def mutated(draw: st.DrawFn, seed: Path) -> bytes:
    lines = seed.read_bytes().splitlines()
    for _ in range(draw(st.integers(1, 6))):
        index = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(["value", "value", "value", "delete", "cut", "dup", "bytes", "raw"]))
        if how in ("value", "delete"):
            try:
                obj = json.loads(lines[index])
            except (ValueError, RecursionError):  # a junk line inserted before
                continue
            nodes = _nodes(obj)
            if not nodes:
                continue
            path = draw(st.sampled_from(nodes))
            _set(obj, path, draw(HOSTILE), how == "delete")
            lines[index] = json.dumps(obj).encode()
        elif how == "cut":
            line = lines[index]
            lines[index] = line[: draw(st.integers(0, max(0, len(line) - 1)))]
        elif how == "dup":
            lines.insert(draw(st.integers(0, len(lines))), lines[index])
        elif how == "bytes":
            line = bytearray(lines[index])
            if line:
                line[draw(st.integers(0, len(line) - 1))] = draw(st.integers(0, 255))
            lines[index] = bytes(line).replace(b"\n", b" ")
        else:
            lines.insert(index, draw(st.sampled_from([b"[" * 5000, b"1", b"null", b'"\\ud800"', b"{}", b'{"type":5}'])))
    return b"".join(line + b"\n" for line in lines)


def run_pipeline(path: Path) -> None:
    """reader → context → plan → cache → retrieval → JSON; every stage must succeed."""
    pipeline = SessionPipeline(path)
    seen_derived = False
    for item in pipeline.updates(force=True, now=2_000_000_000):
        if isinstance(item, Snapshot):
            json.dumps(item.context.to_json(), ensure_ascii=False).encode("utf-8")
            item.reader.diagnostics.summary().encode("utf-8")
        elif isinstance(item, Derived):
            seen_derived = True
            assert item.errors == (), item.errors
    assert seen_derived


def run_cli(path: Path) -> None:
    """map / cache / context --json through the real CLI: exit 0 or 2 (one line), never a traceback."""
    from typer.testing import CliRunner

    from ds4tui.cli import app

    for command in (["map", "--json"], ["cache", "--json"], ["context", "--json"]):
        result = CliRunner().invoke(app, [*command, str(path)])
        assert result.exit_code in (0, 2), (command, result.exit_code, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (command, result.exception)


def _fuzz(agent: str) -> Any:
    @settings(settings.get_profile(PROFILE))
    @given(blob=mutated(AGENTS[agent]))
    def test(tmp_path_factory: Any, monkeypatch: Any, blob: bytes) -> None:
        folder = Path(tmp_path_factory.mktemp(f"fuzz-{agent}"))
        monkeypatch.setenv("DS4TUI_STATE_DIR", str(folder / "state"))
        path = folder / "s.jsonl"
        path.write_bytes(blob)
        run_pipeline(path) if agent == "pi" else run_cli(path)

    return test


test_fuzz_pi = _fuzz("pi")
test_fuzz_claude_code = _fuzz("claude-code")
test_fuzz_codex = _fuzz("codex")
