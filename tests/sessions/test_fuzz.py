"""Issue 13: property fuzzing of every agent ds4tui reads: reader → context → plan → cache →
retrieval → JSON, on mutated real sessions. No stage may raise (the pipeline's `errors` stay
empty), the output must encode as UTF-8 JSON, and the read must finish.

Budget: the `ci` hypothesis profile (a fixed, small number of examples) by default;
`DS4TUI_FUZZ=long` runs the `long` profile (thousands of examples) on demand.

The time-boxed run (issue 30; CI's fuzz step, `.ci/run`): `DS4TUI_FUZZ_SECONDS=N` runs rounds of
fresh random examples for N seconds in all (a third per agent), each through every read command
as the console runs it (`map`, `map --json` by its own entry point, `context`, `cache`, `plan`,
text and `--json`; `retrieve --json` on Pi), failing on any exception that is not an exit, and on
"internal error" or "Traceback" in the output. Without the variable it is skipped.

Adding an agent is one line in `AGENTS`: a name and a seed session file (the agent registry
picks the reader from the file).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
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
    "gemini-cli": FIXTURES / "gemini/main/home/.gemini/tmp/proj-gemini/chats/session-2026-12-07T19-24-3adf0510.jsonl",
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


READ_COMMANDS = (["map"], ["context"], ["context", "--json"], ["cache"], ["cache", "--json"], ["plan"], ["plan", "--json"])
"""Every read command, as text and JSON; `map --json` goes through its own console entry point
(`ds4tui.mapjson.main`, as the `ds4tui` script runs it)."""


def run_every_command(path: Path, agent: str) -> None:
    """Each read command on `path` in-process, as the console runs it (`run_guarded`): exit 0, 1
    (a refusal, e.g. `plan` on a Claude Code transcript) or 2 (bad input, one line); never an
    exception, never "internal error" or a traceback in the output."""
    from typer.testing import CliRunner

    from ds4tui.cli import app
    from ds4tui.errors import safe_streams
    from ds4tui.mapjson import _fast_map_args, dumps_map, map_json

    class ConsoleRunner(CliRunner):
        """The runner with the console's streams: `run_guarded` makes them escape what they
        cannot encode (`errors.safe_streams`: a lone surrogate prints as `\\ud800`)."""

        @contextlib.contextmanager
        def isolation(self, *args: Any, **kwargs: Any) -> Any:
            with super().isolation(*args, **kwargs) as streams:
                safe_streams()
                yield streams

    commands = [*READ_COMMANDS, *([["retrieve", "--json"]] if agent == "pi" else [])]
    for command in commands:
        result = ConsoleRunner().invoke(app, [*command, str(path)])
        output = result.output  # (stdout and stderr)
        assert result.exit_code in (0, 1, 2), (command, result.exit_code, output[-600:])
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            where = traceback.extract_tb(result.exc_info[2])[-1] if result.exc_info else None
            at = f" at {where.filename}:{where.lineno}" if where else ""
            raise AssertionError(f"{' '.join(command)}: internal error ({result.exception!r}{at})")
        assert "internal error" not in output and "Traceback" not in output, (command, output[-600:])
    fast = _fast_map_args(["map", "--json", str(path)])
    if fast is not None:  # the console's own `map --json` (it ends in os._exit: its steps, in-process,
        # without `_load_cl100k_lean`, which trims the process's shared tiktoken encoding for good)
        from ds4sessions.agents.pi.discovery import load_model_table
        from ds4sessions.agents.pi.live import open_map_snapshot

        try:
            dumps_map(map_json(open_map_snapshot(fast[0], load_model_table(), exact=fast[1]))).encode("utf-8")
        except OSError:
            pass  # (run_guarded: one line, exit 2)


FUZZ_SECONDS = float(os.environ.get("DS4TUI_FUZZ_SECONDS") or 0)


def _round(agent: str) -> Any:
    """One round of the time-boxed run: 8 fresh random examples (no database, not derandomized,
    so each round explores new inputs; a failure prints the example that reproduces it)."""

    @settings(max_examples=8, deadline=None, derandomize=False, database=None, verbosity=Verbosity.quiet,
              phases=(Phase.generate,),  # no shrinking: it has no time bound (the saved input reproduces)
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(blob=mutated(AGENTS[agent]))
    def test(tmp_path_factory: Any, monkeypatch: Any, blob: bytes) -> None:
        folder = Path(tmp_path_factory.mktemp(f"fuzzbox-{agent}"))
        monkeypatch.setenv("DS4TUI_STATE_DIR", str(folder / "state"))
        path = folder / "s.jsonl"
        path.write_bytes(blob)
        try:
            if agent == "pi":
                run_pipeline(path)
            run_every_command(path, agent)
        except Exception as err:  # one line and the input to reproduce it, not a 100 kB repr
            kept = Path(os.environ.get("DS4TUI_FUZZ_FAILURES") or tmp_path_factory.getbasetemp()) / f"fuzz-{agent}-failure.jsonl"
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_bytes(blob)
            raise AssertionError(f"{agent}: {str(err).splitlines()[0][:400]}; the input is kept in {kept}") from None

    return test


@pytest.mark.skipif(not FUZZ_SECONDS, reason="the time-boxed fuzz run is CI's own step (set DS4TUI_FUZZ_SECONDS)")
@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_fuzz_every_read_command_time_boxed(agent: str, tmp_path_factory: Any, monkeypatch: Any) -> None:
    deadline = time.monotonic() + FUZZ_SECONDS / len(AGENTS)
    rounds = 0
    while time.monotonic() < deadline:
        _round(agent)(tmp_path_factory, monkeypatch)
        rounds += 1
    print(f"\nfuzz {agent}: {rounds * 8} examples in {FUZZ_SECONDS / len(AGENTS):g} s")


def test_every_read_command_on_each_agents_seed(tmp_path: Path, monkeypatch: Any) -> None:
    """The time-boxed run's command list, once on each agent's unmutated seed (always runs)."""
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
    for agent, seed in AGENTS.items():
        run_every_command(seed, agent)


test_fuzz_pi = _fuzz("pi")
test_fuzz_claude_code = _fuzz("claude-code")
test_fuzz_codex = _fuzz("codex")
test_fuzz_gemini_cli = _fuzz("gemini-cli")


def _nested_as(value: Any, scalar: Any, kind: type, top: bool = True) -> Any:
    """`value` with every JSON array (`kind` list) or every object below the row itself (`kind`
    dict) inside it, at any depth, replaced by `scalar`."""
    if isinstance(value, kind) and not top:
        return scalar
    if isinstance(value, dict):
        return {k: _nested_as(v, scalar, kind, False) for k, v in value.items()}
    if isinstance(value, list):
        return [_nested_as(v, scalar, kind, False) for v in value]
    return value


@pytest.mark.slow
@pytest.mark.parametrize("kind, scalar", [(list, 7), (list, "x"), (list, {"a": 1}), (dict, 7.5), (dict, "x"), (dict, [1])],
                         ids=["array-number", "array-string", "array-object", "object-number", "object-string", "object-array"])
@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_every_nested_field_of_the_wrong_type(agent: str, kind: type, scalar: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """Each agent's seed with the arrays (or the objects) inside a run of ten rows made a number,
    a string or another container (a field of the wrong type, as CI's fuzz found in a Claude
    Code compact boundary's `preservedMessages.uuids` and, in a 10-minute run, its
    `compactMetadata`): every read command exits 0 or 2, never "internal error". Deterministic:
    every row is hit once per kind."""
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
    lines = AGENTS[agent].read_bytes().splitlines()
    for start in range(0, len(lines), 10):
        out = []
        for i, line in enumerate(lines):
            if start <= i < start + 10:
                try:
                    line = json.dumps(_nested_as(json.loads(line), scalar, kind)).encode()
                except ValueError:
                    pass
            out.append(line + b"\n")
        path = tmp_path / f"{start}.jsonl"
        path.write_bytes(b"".join(out))
        run_every_command(path, agent)
