"""A home directory made of the shared Pi, Claude Code and Codex samples, moved to "now".

`make_home(root, now, plan)` copies sample session files into `root/home` laid out the way each
agent keeps them (`PI_CODING_AGENT_DIR=root/pi`, `CLAUDE_CONFIG_DIR=root/claude`,
`CODEX_HOME=root/codex`, `HOME=root/home`), with

- every `timestamp` (ISO strings and Pi's millisecond numbers, at any depth) shifted so the file's
  latest one is `now - age` seconds (the plan gives the age of each file);
- the session id replaced by a fresh one (file names included), so copies of one sample are
  distinct sessions;
- the file's mtime set to `now - mtime_age` (liveness by recency).

Lines that are not JSON (a torn last line) are copied byte for byte. Used by the overview tests
and by bench/bench_overview.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def _iso_to_s(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _s_to_iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _walk(obj: Any, fn) -> Any:  # type: ignore[no-untyped-def]
    if isinstance(obj, dict):
        return {k: fn(k, v) if k == "timestamp" else _walk(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_walk(v, fn) for v in obj]
    return obj


def latest_timestamp(lines: list[bytes]) -> float:
    """The latest `timestamp` of a file's JSON lines, epoch seconds."""
    latest = 0.0

    def note(_: str, value: Any) -> Any:
        nonlocal latest
        if isinstance(value, str) and ISO.match(value):
            latest = max(latest, _iso_to_s(value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1e12:
            latest = max(latest, value / 1000)
        return value

    for raw in lines:
        try:
            _walk(json.loads(raw), note)
        except ValueError:
            continue
    return latest


def shifted_copy(source: Path, target: Path, *, latest_at: float, ids: dict[str, str]) -> float:
    """Copy `source` to `target` with its timestamps moved so the latest is `latest_at` (epoch
    seconds) and each key of `ids` replaced by its value; returns the shift in seconds."""
    data = source.read_bytes()
    lines = data.split(b"\n")
    delta = latest_at - latest_timestamp(lines)

    def move(_: str, value: Any) -> Any:
        if isinstance(value, str) and ISO.match(value):
            return _s_to_iso(_iso_to_s(value) + delta)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1e12:
            return int(round(value + delta * 1000))
        return value

    out: list[bytes] = []
    for raw in lines:
        try:
            obj = json.loads(raw)
        except ValueError:
            out.append(raw)
            continue
        text = json.dumps(_walk(obj, move), ensure_ascii=False, separators=(",", ":"))
        for old, new in ids.items():
            text = text.replace(old, new)
        out.append(text.encode("utf-8"))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"\n".join(out))
    return delta


@dataclass(frozen=True)
class Placed:
    """One copied session: agent, sample name, target path, its new session id, the epoch second
    of its latest timestamp."""

    agent: str
    sample: str
    path: Path
    session_id: str
    latest_at: float


def env_for(root: Path) -> dict[str, str]:
    """The environment that points every agent (and ds4tui's state dir) into `root`."""
    return {
        "HOME": str(root / "home"),
        "PI_CODING_AGENT_DIR": str(root / "pi"),
        "CLAUDE_CONFIG_DIR": str(root / "claude"),
        "CODEX_HOME": str(root / "codex"),
        "DS4TUI_STATE_DIR": str(root / "state"),
    }


def place_pi(shared: Path, root: Path, sample: str, *, latest_at: float, mtime: float, session_id: str | None = None) -> Placed:
    """A Pi sample as `<pi>/sessions/--<cwd>--/<time>_<new id>.jsonl` (`session_id`: the new id,
    default a random one)."""
    source = shared / "sessions-pi" / f"{sample}.jsonl"
    first = json.loads(source.read_bytes().split(b"\n", 1)[0])
    old_id = first.get("id") or uuid.uuid4().hex
    new_id = session_id or str(uuid.uuid4())
    cwd = str(first.get("cwd") or "/home/dev/project")
    folder = root / "pi" / "sessions" / ("--" + cwd.strip("/").replace("/", "-") + "--")
    stamp = _s_to_iso(latest_at).replace(":", "-").replace(".", "-")
    target = folder / f"{stamp}_{new_id}.jsonl"
    shifted_copy(source, target, latest_at=latest_at, ids={old_id: new_id})
    os.utime(target, (mtime, mtime))
    return Placed("pi", sample, target, new_id, latest_at)


def place_claude(shared: Path, root: Path, *, latest_at: float, mtime: float, subagents: bool = True) -> list[Placed]:
    """The Claude Code sample (and its subagent) under `<claude>/projects/…` with a new session id."""
    projects = shared / "sessions-claude" / "projects"
    main = next(projects.glob("*/*.jsonl"))
    old_id = main.stem
    new_id = str(uuid.uuid4())
    folder = root / "claude" / "projects" / main.parent.name
    target = folder / f"{new_id}.jsonl"
    shifted_copy(main, target, latest_at=latest_at, ids={old_id: new_id})
    os.utime(target, (mtime, mtime))
    placed = [Placed("claude-code", main.name, target, new_id, latest_at)]
    if subagents:
        for sub in (main.parent / old_id / "subagents").glob("agent-*.jsonl"):
            sub_target = folder / new_id / "subagents" / sub.name
            sub_lines = sub.read_bytes().split(b"\n")
            # keep the subagent's time relative to the main transcript
            main_latest = latest_timestamp(main.read_bytes().split(b"\n"))
            shifted_copy(sub, sub_target, latest_at=latest_at + latest_timestamp(sub_lines) - main_latest,
                         ids={old_id: new_id})
            meta = sub.with_name(sub.name[: -len(".jsonl")] + ".meta.json")
            if meta.exists():
                (sub_target.parent / meta.name).write_bytes(meta.read_bytes())
            os.utime(sub_target, (mtime, mtime))
            placed.append(Placed("claude-code", sub.name, sub_target, new_id, latest_at))
    return placed


def place_codex(shared: Path, root: Path, sample_glob: str, *, latest_at: float, mtime: float) -> Placed:
    """One Codex rollout under `<codex>/sessions/YYYY/MM/DD/rollout-<time>-<new id>.jsonl`."""
    source = next((shared / "sessions-codex" / "sessions").glob(f"*/*/*/{sample_glob}"))
    old_id = source.stem[-36:]
    new_id = str(uuid.uuid4())
    day = dt.datetime.fromtimestamp(latest_at, dt.timezone.utc)
    folder = root / "codex" / "sessions" / day.strftime("%Y/%m/%d")
    target = folder / f"rollout-{day.strftime('%Y-%m-%dT%H-%M-%S')}-{new_id}.jsonl"
    shifted_copy(source, target, latest_at=latest_at, ids={old_id: new_id})
    os.utime(target, (mtime, mtime))
    return Placed("codex", source.name, target, new_id, latest_at)
