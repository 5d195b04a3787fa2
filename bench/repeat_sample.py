#!/usr/bin/env python3
"""Large Claude Code / Codex / Pi sessions made from real samples (issue 36).

    uv run python bench/repeat_sample.py claude OUT.jsonl --mb 100
    uv run python bench/repeat_sample.py codex OUT.jsonl --mb 100
    uv run python bench/repeat_sample.py pi OUT.jsonl --mb 100      # the Pi path's yardstick

Claude Code and Codex: the shared sample's lines (`$DS4TUI_SHARED/sessions-claude/…/af1a7763-….jsonl`,
66 lines written by Claude Code 2.1.197; `sessions-codex/…/rollout-…-7ef9-….jsonl`, 105 lines
by Codex 0.171.0) written again and again until the file holds `--mb` MiB, each copy with fresh
ids: every UUID but the session's own (`sessionId`, Codex's thread id), every `msg_`/`toolu_`/
`call_`/`fc_`/`rs_`/`resp_` id, replaced by one of the same length made from (copy, id); every
ISO time shifted by the copy's number × (the sample's span + 1 min), so times grow through the
file. A Claude Code copy's first row is chained (`parentUuid`) to the previous copy's last
main-chain row; Codex's `session_meta` line is written once, at the top. So the file is what a
long session that repeated the sample's CLI calls would leave, its compactions included (one per
copy, as in the sample): each copy's rows are the reader's work, and the context the screen
shows is the last copy's. `--no-compaction` leaves the compaction out (Claude Code: the
`compact_boundary` and summary rows, the next row chained to the boundary's logical parent;
Codex: the `compacted` line), so the context is the whole file.

Pi: `bench_planner.synthetic_session` with as many turns as make `--mb` MiB (the Pi path's
yardstick of issue 36: `map --json` and the dashboard on a Pi file of the same size).

The template is cut once into literal text and id / time slots; a copy is one join (~0.5 s per
100 MiB of output on this machine).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CLAUDE_SAMPLE = Path("sessions-claude/projects/-home-dev-proj-claude/af1a7763-5fb1-49c2-9069-d33ceb06acd6.jsonl")
CODEX_SAMPLE = Path("sessions-codex/sessions/2026/12/02/rollout-2026-12-02T01-10-23-01a2344d-7ef9-7e61-a841-8556539ac489.jsonl")

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_SLOT = re.compile(
    rf"(?P<uuid>{_UUID})"
    r"|(?P<id>\b(?:msg|toolu|call|fc|rs|resp)_[0-9A-Za-z][0-9A-Za-z-]*)"
    r"|(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?Z)")
_ALNUM = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def shared_dir() -> Path:
    """The shared reference folder: `$DS4TUI_SHARED`, else `../shared` or `../../shared` of the
    repository."""
    for candidate in (os.environ.get("DS4TUI_SHARED"), ROOT.parent / "shared", ROOT.parent.parent / "shared"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    raise SystemExit("no shared folder: set DS4TUI_SHARED")


def _fresh(value: str, copy: int) -> str:
    """`value` (an id) for copy `copy`: the same length and shape (UUID dashes, a prefix kept),
    its characters drawn from a digest of (copy, value); copy 0 keeps the original."""
    if copy == 0:
        return value
    digest = hashlib.blake2b(f"{copy}:{value}".encode(), digest_size=32).digest()
    if re.fullmatch(_UUID, value):
        h = digest.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
    prefix, _, body = value.partition("_")
    chars = "".join(_ALNUM[b % 62] for b in (digest * (len(body) // 32 + 1))[: len(body)])
    if "-" in body:  # (keep the dashes where they were)
        chars = "".join("-" if c == "-" else n for c, n in zip(body, chars))
    return f"{prefix}_{chars}"


def _iso(value: str, shift: float) -> str:
    when = dt.datetime.fromisoformat(value.replace("Z", "+00:00")) + dt.timedelta(seconds=shift)
    text = when.strftime("%Y-%m-%dT%H:%M:%S.%f")
    decimals = len(value.split(".")[1]) - 1 if "." in value else 0
    return (text[: 20 + decimals] if decimals else text[:19]) + "Z"


class Template:
    """The sample's lines cut into literal text and slots (`uuid`, `id`, `time`)."""

    def __init__(self, lines: list[str], keep: set[str]) -> None:
        self.parts: list[tuple[str, str]] = []  # (kind, text): kind "" = literal
        self.keep = keep
        times = []
        for line in lines:
            at = 0
            for m in _SLOT.finditer(line):
                self.parts.append(("", line[at:m.start()]))
                kind = m.lastgroup or ""
                self.parts.append(("" if m.group() in keep else kind, m.group()))
                if kind == "time":
                    times.append(m.group())
                at = m.end()
            self.parts.append(("", line[at:] + "\n"))
        stamps = sorted(dt.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in times)
        self.span = (stamps[-1] - stamps[0] if stamps else 0.0) + 60.0

    def copy(self, n: int) -> str:
        """The text of copy `n` (fresh ids, times shifted by `n` spans)."""
        ids: dict[str, str] = {}
        shift = n * self.span
        out = []
        for kind, text in self.parts:
            if not kind:
                out.append(text)
            elif kind == "time":
                out.append(_iso(text, shift) if n else text)
            else:
                fresh = ids.get(text)
                if fresh is None:
                    fresh = ids[text] = _fresh(text, n)
                out.append(fresh)
        return "".join(out)


def _claude_lines(sample: Path, compaction: bool = True) -> tuple[list[str], set[str], str | None, str | None]:
    """The sample's lines, the ids kept (the session's), the first row's uuid and the last
    main-chain uuid (to chain the copies). `compaction` False: without the `compact_boundary`
    and `isCompactSummary` rows (a row that named one as its parent names that row's logical
    parent instead), so the context is the whole chain."""
    import json

    lines = sample.read_text(encoding="utf-8").splitlines()
    if not compaction:
        alias: dict[str, str | None] = {}
        kept_lines = []
        for line in lines:
            row = json.loads(line)
            parent = row.get("parentUuid")
            if parent in alias:
                row["parentUuid"] = alias[parent]
            if row.get("subtype") == "compact_boundary" or row.get("isCompactSummary"):
                alias[row["uuid"]] = row.get("logicalParentUuid") or row.get("parentUuid")
                continue
            kept_lines.append(json.dumps(row, separators=(",", ":"), ensure_ascii=False) if parent in alias else line)
        lines = kept_lines
    keep: set[str] = set()
    first = last = None
    for line in lines:
        row = json.loads(line)
        if isinstance(row.get("sessionId"), str):
            keep.add(row["sessionId"])
        if isinstance(row.get("uuid"), str):
            first = first or row["uuid"]
            if row.get("isSidechain") is not True:
                last = row["uuid"]
    return lines, keep, first, last


class Repeater:
    """The copies of one agent's sample (module doc): `head()` (Codex's `session_meta` line, ""
    for Claude Code) and `copy(n)`, the text of copy `n` (chained to copy `n - 1`)."""

    def __init__(self, agent: str, shared: Path, compaction: bool = True) -> None:
        import json

        self.agent = agent
        if agent == "claude":
            lines, keep, first, last = _claude_lines(shared / CLAUDE_SAMPLE, compaction)
            # the first row (parentUuid null) is chained to the previous copy's last main-chain row
            head = next(i for i, line in enumerate(lines) if first in line)
            assert '"parentUuid":null' in lines[head]
            self._marker = "00000000-0000-4000-8000-00000000c0de"
            lines[head] = lines[head].replace('"parentUuid":null', f'"parentUuid":"{self._marker}"', 1)
            self._last = last
            self._head = ""
            self.template = Template(lines, keep | {self._marker})
        else:
            lines = (shared / CODEX_SAMPLE).read_text(encoding="utf-8").splitlines()
            if not compaction:
                lines = [line for line in lines if '"type":"compacted"' not in line[:80]]
            meta = json.loads(lines[0])
            keep = {str(meta.get("payload", {}).get("id"))} | set(re.findall(_UUID, CODEX_SAMPLE.name))
            self._head = lines[0] + "\n"
            self.template = Template(lines[1:], keep)

    def head(self) -> str:
        """What the file starts with, once (Codex's `session_meta` line)."""
        return self._head

    def copy(self, n: int) -> str:
        """The lines of copy `n` (each ending in a newline)."""
        text = self.template.copy(n)
        if self.agent == "claude":
            parent = "null" if n == 0 or not self._last else f'"{_fresh(self._last, n - 1)}"'
            text = text.replace(f'"parentUuid":"{self._marker}"', f'"parentUuid":{parent}', 1)
        return text


def write_repeated(agent: str, out: Path, mb: float, shared: Path, compaction: bool = True) -> tuple[Repeater, int]:
    """Write `agent`'s sample again and again to `out` until it holds `mb` MiB (module doc);
    returns the repeater and how many copies were written (copy that number next to append)."""
    repeater = Repeater(agent, shared, compaction)
    limit, n = int(mb * (1 << 20)), 0
    with out.open("w", encoding="utf-8") as f:
        f.write(repeater.head())
        size = len(repeater.head().encode())
        while size < limit:
            text = repeater.copy(n)
            f.write(text)
            size += len(text.encode("utf-8"))
            n += 1
    return repeater, n


def write_pi(out: Path, mb: float) -> int:
    """A Pi session of about `mb` MiB (`bench_planner.synthetic_session`); returns its turns."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_planner import synthetic_session

    probe = out.with_suffix(".probe")
    synthetic_session(probe, 1000)
    per_turn = probe.stat().st_size / 1000
    probe.unlink()
    turns = max(1, round(mb * (1 << 20) / per_turn))
    synthetic_session(out, turns)
    return turns


def main(argv: list[str] | None = None) -> int:
    """Command line (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("agent", choices=["claude", "codex", "pi"])
    ap.add_argument("out", type=Path)
    ap.add_argument("--mb", type=float, default=100.0, help="size in MiB (default 100)")
    ap.add_argument("--no-compaction", action="store_true",
                    help="leave the sample's compaction out: the context grows with the file")
    args = ap.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.agent == "pi":
        n = write_pi(args.out, args.mb)
        what = "turns"
    else:
        _, n = write_repeated(args.agent, args.out, args.mb, shared_dir(), not args.no_compaction)
        what = "copies of the sample"
    print(f"{args.out}: {args.out.stat().st_size / (1 << 20):.1f} MiB, {n:,} {what}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
