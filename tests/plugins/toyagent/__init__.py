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


class ToyBoxTail:
    """The tailer of one toybox session (`ingest.tailer.Tailer`'s interface): the session's rows
    not delivered yet, re-read from the box file at each poll; a reset when the list shrank, a
    "deleted" batch when the session or the box is gone."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        box, _, self.session = str(path).rpartition("#")
        self.box = Path(box)
        self.delivered = 0
        self.size = 0
        self.deleted = False

    def rows(self) -> list[Any]:
        data = json.loads(self.box.read_bytes())
        rows = data.get("sessions", {}).get(self.session)
        if not isinstance(rows, list):
            raise FileNotFoundError(2, f"no session {self.session} in this box", str(self.box))
        return rows

    def polls(self, limit: int | None = None) -> Iterable[Any]:
        yield self.poll(limit)

    def poll(self, limit: int | None = None) -> Any:
        from ds4sessions.ingest.tailer import TailBatch, TailLine

        try:
            rows = self.rows()
        except FileNotFoundError:
            if self.delivered == 0 and not self.deleted:
                raise
            first, self.deleted = not self.deleted, True
            return TailBatch((), "deleted" if first else None, 0, self.size, self.size)
        reset = None
        if len(rows) < self.delivered or self.deleted:
            reset, self.delivered = ("appeared" if self.deleted else "rewritten"), 0
        self.deleted = False
        raw = [json.dumps(row).encode() for row in rows]
        lines = tuple(TailLine(i + 1, 0, line) for i, line in enumerate(raw) if i >= self.delivered)
        self.delivered = len(rows)
        self.size = sum(len(line) for line in raw)
        return TailBatch(lines, reset, 0, self.size, self.size)

    def pending_line(self) -> None:
        return None


class ToyBoxAgent(ToyChatAgent):
    """Toy Chat sessions kept several to a file ("box"), as a database keeps them: a session is
    named `BOX.toybox#ID` (a handle), the box holds `{"sessions": {ID: [toychat rows]}}`. It
    proves the handle seam: `claims_handle`, `handle_files`, `handle_stat`, `tailer`."""

    name = "toybox"
    label = "Toy Box"
    capabilities = Capabilities(ds4_plan=True, read_only_reason="Toy Box sessions are read-only (a test plug-in)")

    def discover(self) -> list[SessionInfo]:
        home = os.environ.get("TOYCHAT_HOME")
        out = []
        for box in sorted(Path(home).glob("*.toybox")) if home else ():
            for sid in json.loads(box.read_bytes()).get("sessions", {}):
                handle = Path(f"{box}#{sid}")
                size, modified = self.handle_stat(str(handle)) or (0, 0.0)  # (a broken box: discovery fails, shown)
                out.append(SessionInfo(agent=self.name, path=handle, session_id=sid, modified=modified, size=size))
        return out

    def recognizes(self, head: bytes) -> bool:
        return False

    def claims_handle(self, text: str) -> bool:
        box, sep, sid = text.rpartition("#")
        return bool(sep and sid) and box.endswith(".toybox")

    def handle_files(self, text: str) -> tuple[Path, ...]:
        return (Path(text.rpartition("#")[0]),)

    def handle_stat(self, text: str) -> tuple[int, float] | None:
        """Raises OSError (FileNotFoundError: no box, or no such session in it)."""
        tail = ToyBoxTail(Path(text))
        size = sum(len(json.dumps(row).encode()) for row in tail.rows())
        return size, tail.box.stat().st_mtime

    def tailer(self, path: Path) -> ToyBoxTail:
        return ToyBoxTail(path)

    def reader(self, path: Path) -> ToyChatReader:
        reader = ToyChatReader(path)
        reader.conversation = _as(reader.conversation, self.name)  # type: ignore[method-assign]
        return reader


def _as(make: Any, agent: str) -> Any:
    from dataclasses import replace

    return lambda: replace(make(), agent=agent)
