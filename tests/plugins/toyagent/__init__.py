"""A toy agent plug-in, as a third party would ship one: its own file format ("toychat"), one
class, registered under ds4tui's entry-point group `ds4tui.agents` (toyagent-0.1.dist-info).

It proves the seam of issue 28: with this package on `sys.path` and not a line of ds4tui changed,
a toychat file gets the dashboard, `home`, `sessions`, `usage`, `map`/`cache`/`context`/`plan`
`--json`, and one-line refusals for steering and retrieval.

The format (one JSON object per line):

    {"toychat": 1, "id": "t-1", "model": "toy-large", "window": 8000, "cwd": "/w", "title": "..."}
    {"role": "user", "text": "hello", "t": 1767225600}
    {"role": "assistant", "text": "hi", "call": {"name": "grep", "args": {"q": "x"}},
     "usage": {"in": 10, "cached": 90, "out": 5}, "t": 1767225601}
    {"role": "tool", "name": "grep", "text": "3 matches", "t": 1767225602}

`usage.in` is the uncached input, `cached` what was read from the prompt cache (disjoint).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from ds4sessions.agents.base import Capabilities, Conversation, MessageMeta, Request, SessionInfo, Usage
from ds4sessions.agents.plugin import ConversationAgent
from ds4sessions.ingest.diagnostics import Diagnostic, Problem

NAME = "toychat"


class ToyChatReader:
    """Feeds toychat lines; `conversation()` is the frozen state (`agents.base.SessionReader`)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.header: dict[str, Any] = {}
        self.messages: list[dict[str, Any]] = []
        self.meta: list[MessageMeta] = []
        self.requests: list[Request] = []
        self.diagnostics: list[Diagnostic] = []
        self.entries = 0

    def feed(self, lines: Iterable[tuple[int, int, bytes]]) -> None:
        for line_no, offset, raw in lines:
            if not bytes(raw).strip():
                continue
            try:
                row = json.loads(bytes(raw))
            except ValueError:
                self.diagnostics.append(Diagnostic(Problem.MALFORMED, "not valid JSON", line_no, offset))
                continue
            if not isinstance(row, dict):
                self.diagnostics.append(Diagnostic(Problem.NON_OBJECT, "not a JSON object", line_no, offset))
                continue
            self.entries += 1
            if "toychat" in row:
                self.header = row
                continue
            self._row(row, line_no)

    def _row(self, row: dict[str, Any], line_no: int) -> None:
        role, text, when = row.get("role"), str(row.get("text", "")), row.get("t")
        ms = when * 1000 if isinstance(when, (int, float)) else None
        eid = f"L{line_no}"
        if role == "user":
            self.messages.append({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ms})
            self.meta.append(MessageMeta(eid))
        elif role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            call = row.get("call")
            if isinstance(call, dict):
                blocks.append({"type": "toolCall", "id": eid, "name": str(call.get("name", "?")), "arguments": call.get("args") or {}})
            self.messages.append({"role": "assistant", "content": blocks, "timestamp": ms})
            self.meta.append(MessageMeta(eid, tool=call.get("name") if isinstance(call, dict) else None))
            u = row.get("usage") if isinstance(row.get("usage"), dict) else {}
            usage = Usage(input=int(u.get("in", 0)), cache_read=int(u.get("cached", 0)), output=int(u.get("out", 0)))
            self.requests.append(Request(len(self.requests), usage, eid, when if isinstance(when, (int, float)) else None,
                                         self.header.get("model"), "toy", len(self.messages) - 1))
        elif role == "tool":
            name = str(row.get("name", "?"))
            self.messages.append({"role": "toolResult", "toolCallId": eid, "toolName": name,
                                  "content": [{"type": "text", "text": text}], "timestamp": ms})
            self.meta.append(MessageMeta(eid, tool=name))
        else:
            self.diagnostics.append(Diagnostic(Problem.BAD_FIELD, f"unknown role {role!r}", line_no))

    def conversation(self) -> Conversation:
        h = self.header
        return Conversation(
            agent=NAME, path=self.path, capabilities=ToyChatAgent.capabilities, messages=tuple(self.messages),
            meta=tuple(self.meta), requests=tuple(self.requests), session_id=h.get("id"), title=h.get("title"),
            cwd=h.get("cwd"), model=h.get("model"), provider="toy", context_window=h.get("window"),
            leaf_id=self.meta[-1].entry_id if self.meta else None, entries=self.entries,
            diagnostics=tuple(self.diagnostics),
        )


class ToyChatAgent(ConversationAgent):
    """The toychat agent: read-only, DS4's plan as a what-if, everything else ds4tui's defaults."""

    name = NAME
    label = "Toy Chat"
    capabilities = Capabilities(ds4_plan=True, read_only_reason="Toy Chat sessions are read-only (a test plug-in)")

    def discover(self) -> list[SessionInfo]:
        home = os.environ.get("TOYCHAT_HOME")
        if not home:
            return []
        out = []
        for path in sorted(Path(home).glob("*.toychat.jsonl")):
            st = path.stat()
            out.append(SessionInfo(agent=NAME, path=path, session_id=path.stem, modified=st.st_mtime, size=st.st_size,
                                   project=home, title=None))
        return sorted(out, key=lambda i: -i.modified)

    def recognizes(self, head: bytes) -> bool:
        first = head.split(b"\n", 1)[0]
        try:
            row = json.loads(first)
        except ValueError:
            return False
        return isinstance(row, dict) and row.get("toychat") == 1

    def reader(self, path: Path) -> ToyChatReader:
        return ToyChatReader(path)
