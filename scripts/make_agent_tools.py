#!/usr/bin/env python3
"""Regenerate `core/src/ds4core/data/agent-tools.json`: the tool definitions Claude Code and Codex
send, per CLI version, read from an agent-oracle run's request log (never typed by hand).

Neither transcript records every tool definition: Claude Code 2.1.337 logs the tools it sends
(`api-request-shape`) but not its *deferred* built-in tools (only their names, in a
`deferred_tools_delta` attachment), which `/context` still lists as "System tools (deferred)";
Codex logs no tool definition at all, yet they are a large part of every request. The agent-oracle's
fake servers log every request body, so one run of the newest CLIs gives them:

- Claude Code: `/context` probes each deferred tool with a `count_tokens` request holding that one
  tool and the message "foo" (Claude Code 2.1.337 cli.js, minified `xKs` → `uz`); we keep, per tool
  name, `jsonChars` = the length of its definition's JSON (Python `json.dumps`, as the fake counts).
- Codex: the `tools` array of its last `/v1/responses` request, whole (so ds4tui counts it with the
  same tokenizer as the messages), with the model it was sent for.

    uv run python scripts/make_agent_tools.py OUT [OUT …]    # OUT: an agent-oracle output folder ($W/out)

Versions come from the rows themselves (`version` on Claude Code rows, `cli_version` in the rollout's
`session_meta`); a new run adds or replaces its versions and keeps the others.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_FILE = ROOT / "core" / "src" / "ds4core" / "data" / "agent-tools.json"
PROBE = [{"role": "user", "content": "foo"}]


def claude_tools(out: Path) -> dict[str, dict]:
    """{version: {tool name: {jsonChars}}} from the Claude Code count_tokens probes of a run."""
    versions: dict[str, dict] = {}
    version = None
    for session in sorted((out / "claude" / "projects").rglob("*.jsonl")):
        for line in session.open():
            row = json.loads(line)
            if isinstance(row.get("version"), str):
                version = row["version"]
                break
        if version:
            break
    if version is None:
        return {}
    tools: dict[str, dict] = {}
    for log in sorted((out / "requests").glob("fake_anthropic*.jsonl")):
        for line in log.open():
            row = json.loads(line)
            body = row.get("body") or {}
            if not str(row.get("path", "")).startswith("/v1/messages/count_tokens"):
                continue
            if body.get("messages") == PROBE and len(body.get("tools") or []) == 1:
                tool = body["tools"][0]
                tools[tool["name"]] = {"jsonChars": len(json.dumps(tool))}
    if tools:
        versions[version] = {"tools": dict(sorted(tools.items())),
                             "source": "count_tokens probes (one tool + \"foo\") in the agent-oracle request log"}
    return versions


def codex_tools(out: Path) -> dict[str, dict]:
    """{version: {model, tools: [definitions], subagentTools?: [definitions]}} from a run's last Codex
    request of a user thread and of a subagent thread (`client_metadata` turn metadata
    `thread_source`; a subagent gets no `multi_agent_v1`)."""
    version = None
    for rollout in sorted((out / "codex" / "sessions").rglob("rollout-*.jsonl")):
        first = json.loads(rollout.open().readline())
        version = (first.get("payload") or {}).get("cli_version") or version
    last: dict[str, dict] = {}
    for log in sorted((out / "requests").glob("fake_openai*.jsonl")):
        for line in log.open():
            row = json.loads(line)
            body = row.get("body") or {}
            if row.get("method") == "POST" and str(row.get("path", "")).endswith("/responses") and body.get("tools"):
                meta = (body.get("client_metadata") or {}).get("x-codex-turn-metadata") or "{}"
                source = json.loads(meta).get("thread_source", "user") if isinstance(meta, str) else "user"
                last["subagent" if source == "subagent" else "user"] = body
    if version is None or "user" not in last:
        return {}
    row = {"model": last["user"].get("model"), "tools": last["user"]["tools"],
           "source": "the tools array of Codex's last /v1/responses request in the agent-oracle request log"}
    if "subagent" in last:
        row["subagentTools"] = last["subagent"]["tools"]
    return {version: row}


def main() -> None:
    """Read each OUT folder given and write agent-tools.json."""
    if len(sys.argv) < 2:
        sys.exit("usage: make_agent_tools.py OUT [OUT …]")
    data = json.loads(OUT_FILE.read_text()) if OUT_FILE.exists() else {}
    data.setdefault("claude-code", {})
    data.setdefault("codex", {})
    for arg in sys.argv[1:]:
        out = Path(arg)
        data["claude-code"].update(claude_tools(out))
        for version, row in codex_tools(out).items():
            data["codex"].setdefault(version, {}).update(row)
    data["generated"] = dt.date.today().isoformat()
    data["script"] = "scripts/make_agent_tools.py"
    data["units"] = {"jsonChars": "characters of the tool definition's JSON"}
    OUT_FILE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT_FILE}: claude-code {sorted(data['claude-code'])}, codex {sorted(data['codex'])}")


if __name__ == "__main__":
    main()
