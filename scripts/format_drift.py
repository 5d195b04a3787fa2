#!/usr/bin/env python3
"""format_drift.py: what the newest Claude Code and Codex write that ds4tui does not know.

Runs the newest releases (or the versions given) through the agent-oracle with ds4tui's scenario
drivers, or reads the output folder of such a run, and lists:

- Claude Code: entry types, `system` subtypes, attachment kinds and content blocks the reader does
  not know (`ds4sessions.agents.claude.reader`: KNOWN_TYPES, KNOWN_SYSTEM_SUBTYPES,
  SENT_ATTACHMENTS / NOT_SENT_ATTACHMENTS, KNOWN_BLOCKS); fields of each entry type never seen in
  the committed fixtures (tests/fixtures/claude*, the files the tests check); `/context` rows whose
  label is not one of ds4tui's category ids (`ds4core.claude_context.CLAUDE_CATEGORIES`);
- Codex: row types, `response_item` types and `event_msg` types the reader does not know, and
  payload fields never seen in tests/fixtures/codex*.

Exit status 0 when nothing is unknown, 1 when something is (the list says what), 2 on a usage error.

    sudo uv run python scripts/format_drift.py --run                 # newest versions (npm view …), needs root
    uv run python scripts/format_drift.py --run --claude-version 2.1.337 --codex-version 0.171.0
    uv run python scripts/format_drift.py --out /tmp/agents/out      # a finished run's $W/out
    … --json                                                          # the findings as JSON

`--run` copies `../shared/tools/agent-oracle` (or `--oracle DIR`) to a temporary folder, adds
tests/agent-oracle/newest/*, and runs its `run.sh` with DRIVERS="run_claude.sh run_codex.sh
run_claude_newest.sh run_codex_newest.sh" inside `unshare -m -n` (root; loopback fakes only).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
DRIVERS = "run_claude.sh run_codex.sh run_claude_newest.sh run_codex_newest.sh"
CONTEXT_ROW = re.compile(r"^\| ([A-Z][^|]*?) \| ([\d.]+[km]?) \| [\d.]+% \|$", re.M)


def npm_version(package: str) -> str:
    """The newest version of an npm package (`npm view PACKAGE version`)."""
    return subprocess.run(["npm", "view", package, "version"], check=True, capture_output=True, text=True).stdout.strip()


def run_oracle(oracle: Path, claude: str, codex: str, work: Path) -> Path:
    """Run the oracle with the scenario drivers into `work`; return its `out/` folder."""
    copy = work / "oracle"
    shutil.copytree(oracle, copy)
    for f in (ROOT / "tests" / "agent-oracle" / "newest").iterdir():
        if f.is_file():
            shutil.copy(f, copy / f.name)
    for f in copy.iterdir():
        f.chmod(0o755)
    env = dict(os.environ, W=str(work / "w"), CLAUDE_VERSION=claude, CODEX_VERSION=codex, DRIVERS=DRIVERS)
    if os.environ.get("DEPS"):
        env["DEPS"] = os.environ["DEPS"]
    log = work / "run.log"
    with log.open("w") as out:
        code = subprocess.run(["bash", str(copy / "run.sh")], env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    if code != 0:
        sys.exit(f"format_drift: the oracle run failed (exit {code}); see {log}")
    return work / "w" / "out"


def rows_of(paths: list[Path]):
    for path in paths:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                yield path, row


def claude_fields(paths: list[Path]) -> dict[str, set[str]]:
    """{entry type (attachment:<kind> for attachments): field names} over `paths`."""
    out: dict[str, set[str]] = defaultdict(set)
    for _, row in rows_of(paths):
        kind = str(row.get("type"))
        out[kind] |= set(row)
        if kind == "attachment" and isinstance(row.get("attachment"), dict):
            out["attachment:" + str(row["attachment"].get("type"))] |= set(row["attachment"])
    return out


def codex_fields(paths: list[Path]) -> dict[str, set[str]]:
    """{row type (response_item:<type>, event_msg:<type>): payload field names} over `paths`."""
    out: dict[str, set[str]] = defaultdict(set)
    for _, row in rows_of(paths):
        payload = row.get("payload") if isinstance(row.get("payload"), dict) else {}
        kind = str(row.get("type"))
        if kind in ("response_item", "event_msg"):
            kind += ":" + str(payload.get("type"))
        out[kind] |= set(payload)
    return out


def claude_findings(out: Path) -> dict[str, object]:
    """What the run's Claude Code transcripts hold that ds4tui does not know."""
    from ds4core.claude_context import CLAUDE_CATEGORIES
    from ds4sessions.agents.claude.reader import read_transcript

    sessions = sorted((out / "claude" / "projects").rglob("*.jsonl"))
    known_fields = claude_fields(sorted(p for d in FIXTURES.glob("claude*") for p in d.rglob("*.jsonl")))
    unknown: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
    versions = set()
    for path in sessions:
        conv = read_transcript(path)
        versions.add(conv.extra.get("version"))
        for group, names in (conv.extra.get("unknownFormats") or {}).items():
            for name, n in names.items():
                seen = unknown[group].setdefault(name, {"count": 0, "bytes": 0})
                seen["count"] += n["count"]
                seen["bytes"] += n["bytes"]
    new_fields = {}
    for kind, fields in claude_fields(sessions).items():
        extra = sorted(fields - known_fields.get(kind, set())) if kind in known_fields else None
        if extra:
            new_fields[kind] = extra
    labels = set(CLAUDE_CATEGORIES.values())
    rows: set[str] = set()
    for _, row in rows_of(sessions):
        if row.get("subtype") == "local_command" and "## Context Usage" in str(row.get("content")):
            rows |= {label for label, _ in CONTEXT_ROW.findall(str(row["content"]))}
    for f in (out / "claude" / "cli-output").glob("*.out"):
        text = f.read_text(errors="replace")
        try:
            text = json.loads(text).get("result", "") if text.lstrip().startswith("{") else text
        except ValueError:
            pass
        if "## Context Usage" in str(text):
            rows |= {label for label, _ in CONTEXT_ROW.findall(str(text))}
    return {"versions": sorted(v for v in versions if v), "sessions": len(sessions), "unknownFormats": dict(unknown),
            "newFields": new_fields, "contextRows": sorted(rows), "unknownContextRows": sorted(rows - labels)}


def codex_findings(out: Path) -> dict[str, object]:
    """What the run's Codex rollouts hold that ds4tui does not know."""
    from ds4sessions.agents.codex.reader import KNOWN_ITEM_TYPES, KNOWN_ROW_TYPES, read_rollout

    rollouts = sorted((out / "codex" / "sessions").rglob("rollout-*.jsonl"))
    known_fields = codex_fields(sorted(p for d in FIXTURES.glob("codex*") for p in d.rglob("rollout-*.jsonl")))
    known_events = {k.split(":", 1)[1] for k in known_fields if k.startswith("event_msg:")}
    row_types, item_types, event_types, versions = set(), set(), set(), set()
    diagnostics = 0
    for path in rollouts:
        conv = read_rollout(path).conversation()
        versions.add(conv.extra.get("cliVersion"))
        row_types |= set(conv.extra.get("rowTypes") or {})
        item_types |= set(conv.extra.get("itemTypes") or {})
        event_types |= {e for e in conv.extra.get("eventTypes") or {} if "." not in e}
        diagnostics += sum((conv.extra.get("diagnosticCounts") or {}).values())
    new_fields = {}
    for kind, fields in codex_fields(rollouts).items():
        extra = sorted(fields - known_fields.get(kind, set())) if kind in known_fields else None
        if extra:
            new_fields[kind] = extra
    return {"versions": sorted(v for v in versions if v), "rollouts": len(rollouts),
            "unknownRowTypes": sorted(row_types - KNOWN_ROW_TYPES - {"legacy_meta"}),
            "unknownItemTypes": sorted(item_types - KNOWN_ITEM_TYPES),
            "unknownEventTypes": sorted(event_types - known_events), "newFields": new_fields,
            "diagnostics": diagnostics}


def unknown_count(findings: dict[str, dict[str, object]]) -> int:
    c, x = findings["claude-code"], findings["codex"]
    return (sum(len(v) for v in c["unknownFormats"].values()) + len(c["newFields"]) + len(c["unknownContextRows"])
            + len(x["unknownRowTypes"]) + len(x["unknownItemTypes"]) + len(x["unknownEventTypes"]) + len(x["newFields"]))


def report(findings: dict[str, dict[str, object]]) -> str:
    c, x = findings["claude-code"], findings["codex"]
    lines = [f"Claude Code {', '.join(c['versions']) or '?'}: {c['sessions']} transcripts"]
    for group, names in c["unknownFormats"].items():
        for name, n in names.items():
            lines.append(f"  unknown {group[:-1]} {name!r}: {n['count']} × ({n['bytes']:,} bytes)")
    for kind, fields in c["newFields"].items():
        lines.append(f"  {kind}: fields not in the fixtures: {', '.join(fields)}")
    lines.append(f"  /context rows: {', '.join(c['contextRows']) or '(no /context output)'}")
    for label in c["unknownContextRows"]:
        lines.append(f"  unknown /context row {label!r}")
    lines.append(f"Codex {', '.join(x['versions']) or '?'}: {x['rollouts']} rollouts, {x['diagnostics']} diagnostics")
    for key in ("unknownRowTypes", "unknownItemTypes", "unknownEventTypes"):
        for name in x[key]:
            lines.append(f"  {key[7:-5].lower()} type not known: {name!r}")
    for kind, fields in x["newFields"].items():
        lines.append(f"  {kind}: fields not in the fixtures: {', '.join(fields)}")
    n = unknown_count(findings)
    lines.append("nothing unknown" if n == 0 else f"{n} unknown item(s)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="an agent-oracle output folder ($W/out) to read")
    parser.add_argument("--run", action="store_true", help="run the oracle first (root; newest versions by default)")
    parser.add_argument("--claude-version", help="Claude Code version for --run (default: npm's newest)")
    parser.add_argument("--codex-version", help="Codex version for --run (default: npm's newest)")
    parser.add_argument("--oracle", type=Path, default=ROOT.parent / "shared" / "tools" / "agent-oracle")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = parser.parse_args()
    if args.run == (args.out is not None):
        parser.print_usage(sys.stderr)
        sys.exit(2)
    out = args.out
    if args.run:
        if not args.oracle.is_dir():
            sys.exit(f"format_drift: no agent-oracle at {args.oracle} (give --oracle DIR)")
        claude = args.claude_version or npm_version("@anthropic-ai/claude-code")
        codex = args.codex_version or npm_version("@openai/codex")
        out = run_oracle(args.oracle, claude, codex, Path(tempfile.mkdtemp(prefix="format-drift-")))
    findings = {"claude-code": claude_findings(out), "codex": codex_findings(out)}
    print(json.dumps(findings, indent=1) if args.json else report(findings))
    sys.exit(1 if unknown_count(findings) else 0)


if __name__ == "__main__":
    main()
