"""Incremental reader of a Claude Code transcript (`projects/<escaped cwd>/<sessionId>.jsonl`).

Feed complete lines; `conversation()` gives the agent-neutral `Conversation`. Rules, each with its
source (docs/claude-code-format.md, "MAIN" = the shared 2.1.197 sample):

- Rows repeated with the same `uuid` count once, the first wins (format doc §7.1; generator README:
  rows written twice around an auto-compaction).
- Assistant rows are one per content block; rows sharing `message.id` make one message and one
  request, whose usage counts once (MAIN:6–8; ccusage #389). Each usage field takes the largest
  copy (a streaming placeholder `input_tokens`: anthropics/claude-code #28197). A side-chain copy
  of a main-chain `message.id` (`/btw`, ccusage #913) is dropped in favour of the main one.
- `model == "<synthetic>"` or `isApiErrorMessage` → `Request.synthetic` (never the last usage;
  MAIN:49, 62; ccusage `types.rs`). `usage.iterations` is never added to the usage (ccusage #1722).
- `message.diagnostics.cache_miss_reason.type` → `Request.miss_reason`. Claude Code 2.1.197 copies
  the API's `diagnostics` into the row when the API returns it (checked with the agent-oracle
  fake: tests/fixtures/claude/*-diagnostics.jsonl); anthropics/claude-code #87966.
- The context is the chain from the leaf (`last-prompt.leafUuid` when it is the newest row, else
  the last main-chain row: a live turn's rows come after the previous turn's `last-prompt`)
  up through `parentUuid`; when it reaches a `compact_boundary` the context starts there: the
  `isCompactSummary` row, then `compactMetadata.preservedMessages.uuids` (they sit before the
  boundary in the file), then the rest of the chain (§4, §7; MAIN:38–39).
- `microcompact_boundary` on the chain: its `compactedToolIds` tool results are replaced by
  Claude Code's cleared marker and its `clearedAttachmentUUIDs` attachments leave (§5).
- Attachments are sent as Claude Code sends them (the generator's request log: agent and skill
  listings and files ride in the messages); a subagent's result is the Agent call's tool result
  (MAIN:26, whose text the parent sent).
- `system` rows with subtype `local_command` (a local slash command's output, e.g. `/context`'s
  table) are sent as user messages: their `content` string as it stands, `<local-command-stdout>`
  / `<local-command-stderr>` wrapper included (Claude Code 2.1.197 bundled cli.js,
  `normalizeMessagesForAPI` (minified `Ak`): a `system` row passes only when `subtype ===
  "local_command"` and becomes `createUserMessage({content: row.content})`, merged into a preceding
  user message). `isMeta` user rows (the `<local-command-caveat>`) are sent too: the same function
  drops only `isVirtual` rows and synthetic API-error replies.
- Never sent: `toolUseResult`, `queue-operation`, `last-prompt`, `mode`, `summary`, `ai-title`,
  `file-history-snapshot`, other `system` rows (§7.6).
- Claude Code 2.1.337 (tests/fixtures/claude-2.1.337) adds request records without a uuid
  (`api-request`, `api-request-blob`, `api-request-route`, `api-request-shape` with the system and
  tools sent, `atis-latch`, `cost-state` with the session's cost and `modelUsage`, `tools-used`),
  attachments that carry the text sent (`rendered[].content`) and state attachments that are never
  sent (`prompt_snapshot` with the system prompt's sections, `session_context`,
  `deferred_tools_record`, `command_permissions`). The reader keeps the latest snapshot, tools,
  deferred tool names, custom agents, memory files and cost state in `extra` for the `/context`
  rows (`views.recorded_rows`). Anything it does not know (entry type, system subtype, attachment
  kind, content block) is counted (`UnknownFormat`: type, count, bytes), listed with the
  diagnostics and shown as "other: <type>", never as a message of raw JSON.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ds4core.spare import Spares
from ds4core.agent_models import claude_window
from ds4core.models import MAX_COUNT
from ds4sessions.agents.common import iso_seconds
from ds4sessions.agents.base import (
    CLAUDE_CODE,
    Capabilities,
    Compaction,
    Conversation,
    MessageMeta,
    Request,
    Usage,
)
from ds4sessions.ingest.diagnostics import EXCERPT_CHARS, Diagnostic, Problem
from ds4sessions.ingest.limits import OversizedLine, iter_lines

CAPABILITIES = Capabilities(
    ds4_plan=True,  # a what-if: "what DS4 would send" (ds4_exact False)
    retrieval=False,  # DS4 retrieves entries outside the context: the reader keeps the context only
    steering=False,
    bridge=False,
    cache_ttl_recorded=True,
    read_only_reason="Claude Code sessions are read-only: ds4tui never writes a Claude Code transcript "
    "(pin, collapse and compact steer only Pi sessions)",
)

SYNTHETIC_MODEL = "<synthetic>"
CLEARED_TOOL_RESULT = "[Old tool result content cleared]"
"""What a microcompacted tool result becomes (Claude Code's marker text)."""

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longer lines are not parsed (counted as malformed), so one bad line cannot exhaust memory."""

LOCAL_COMMAND = "local_command"
LOCAL_COMMAND_SOURCE = "system:local_command"
"""`MessageMeta.source` of a user message made from a `system/local_command` row (module doc)."""

NOT_SENT_TYPES = {"queue-operation", "last-prompt", "mode", "summary", "ai-title", "file-history-snapshot",
                  "permission-mode", "progress", "custom-title",
                  # Claude Code 2.1.337 (tests/fixtures/claude-2.1.337): request records and state, no uuid
                  "api-request", "api-request-blob", "api-request-route", "api-request-shape", "atis-latch",
                  "cost-state", "tools-used"}
"""Entry types that are never sent to the model (format doc §7.6, plus 2.1.337's request records)."""

KNOWN_TYPES = NOT_SENT_TYPES | {"user", "assistant", "system", "attachment"}
"""Every entry type this reader knows; any other is counted as unknown (`unknown_formats`)."""

KNOWN_SYSTEM_SUBTYPES = {"compact_boundary", "microcompact_boundary", "local_command", "api_error", "turn_duration",
                         "stop_hook_summary", "status", "informational", "away_summary"}
"""`system` row subtypes this reader knows (format doc §2; only `local_command` is sent)."""

SENT_ATTACHMENTS = {"skill_listing", "agent_listing_delta", "file", "nested_memory", "memory", "claude_md",
                    "compact_file_reference", "environment", "model", "deferred_tools_delta", "auto_mode", "date",
                    "remote_session_change", "instructions", "todo_reminder", "hook_additional_context",
                    "invoked_skills", "mcp_instructions_delta", "critical_system_reminder", "plan_mode",
                    "queued_command", "edited_text_file", "selected_lines_in_ide", "opened_file_in_ide"}
"""Attachment kinds Claude Code sends as (part of) a user message: 2.1.197's (format doc §2) and
2.1.337's, which write the sent text in the row's `rendered[].content`."""

NOT_SENT_ATTACHMENTS = {"prompt_snapshot", "session_context", "deferred_tools_record", "command_permissions"}
"""2.1.337 attachment kinds that record state and are never sent as a message: `prompt_snapshot`
(the system prompt's sections), `session_context`, `deferred_tools_record` (the definitions of
tools loaded through ToolSearch), `command_permissions`."""

KNOWN_BLOCKS = {"text", "thinking", "redacted_thinking", "tool_use", "tool_result", "image", "document",
                "tool_reference", "server_tool_use", "web_search_tool_result"}
"""Content block types this reader knows; others are counted as unknown."""


def _name(value: Any) -> Any:
    """A JSON `type`/`subtype` value as a name safe to look up in a set: the string itself, None
    for a missing one, else "(object)"/"(array)"/… (a hostile row's `{"type": {}}` is counted
    as an unknown format, never a TypeError)."""
    if value is None or isinstance(value, str):
        return value
    return f"({type(value).__name__})"


def _int(value: Any) -> int:
    """A usage count: a positive int up to 2**53 (`ds4core.models.MAX_COUNT`), else 0 (a
    400-digit integer overflowed the pricing's float: issue 30)."""
    return value if type(value) is int and 0 < value <= MAX_COUNT else 0


def usage_of(raw: Any) -> Usage:
    """`message.usage` → `Usage` (disjoint buckets; `cache_creation_input_tokens` → cache_write
    with the `ephemeral_5m/1h` split). Anything malformed counts as 0."""
    if not isinstance(raw, Mapping):
        return Usage()
    split = raw.get("cache_creation") if isinstance(raw.get("cache_creation"), Mapping) else {}
    return Usage(
        input=_int(raw.get("input_tokens")),
        cache_read=_int(raw.get("cache_read_input_tokens")),
        cache_write=_int(raw.get("cache_creation_input_tokens")),
        output=_int(raw.get("output_tokens")),
        cache_write_5m=_int(split.get("ephemeral_5m_input_tokens")),
        cache_write_1h=_int(split.get("ephemeral_1h_input_tokens")),
    )


def _max_usage(a: Usage, b: Usage) -> Usage:
    return Usage(*(max(x, y) for x, y in zip(
        (a.input, a.cache_read, a.cache_write, a.output, a.cache_write_5m, a.cache_write_1h, a.reasoning),
        (b.input, b.cache_read, b.cache_write, b.output, b.cache_write_5m, b.cache_write_1h, b.reasoning))))


def miss_reason_of(message: Mapping[str, Any]) -> str | None:
    """`message.diagnostics.cache_miss_reason.type`, None when absent or null."""
    diag = message.get("diagnostics")
    if isinstance(diag, Mapping):
        reason = diag.get("cache_miss_reason")
        if isinstance(reason, Mapping) and isinstance(reason.get("type"), str):
            return reason["type"]
    return None


@dataclass
class _Reply:
    """One assistant message folded from its streamed rows."""

    key: str
    first_uuid: str | None
    rows: list[dict[str, Any]]
    usage: Usage
    model: str | None
    sidechain: bool
    synthetic: bool
    timestamp: float | None
    miss_reason: str | None
    line_no: int


@dataclass(frozen=True, slots=True)
class UnknownFormat:
    """Something of a newer Claude Code this reader does not know, counted: `group`
    ("entryTypes", "systemSubtypes", "attachmentTypes", "contentBlocks"), the `name` (type), how many
    rows or blocks (`count`) and their JSON size (`bytes`). Shown with the diagnostics; an unknown
    attachment or block is also mapped as "other: <type>" (never as a message of raw JSON)."""

    group: str
    name: str
    count: int
    bytes: int

    @property
    def kind(self) -> str:
        """The diagnostic kind: `unknown_<group>`."""
        return f"unknown_{self.group}"

    def __str__(self) -> str:
        what = {"entryTypes": "entry type", "systemSubtypes": "system subtype", "attachmentTypes": "attachment kind",
                "contentBlocks": "content block"}.get(self.group, self.group)
        return f"unknown {what} {self.name!r}: {self.count} × ({self.bytes:,} bytes), shown as \"other: {self.name}\""


@dataclass
class _State:
    rows: list[dict[str, Any]] = field(default_factory=list)
    by_uuid: dict[str, dict[str, Any]] = field(default_factory=dict)
    replies: dict[str, _Reply] = field(default_factory=dict)
    reply_order: list[str] = field(default_factory=list)
    leaf: str | None = None
    leaf_line: int = 0
    last_main_line: int = 0
    last_main_uuid: str | None = None
    title: str | None = None
    first_prompt: str | None = None
    session_id: str | None = None
    cwd: str | None = None
    agent_id: str | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    duplicates: int = 0
    entries: int = 0
    version: str | None = None
    prompt_snapshot: list[str] | None = None
    shape_tools: list[dict[str, Any]] | None = None
    deferred: dict[str, None] = field(default_factory=dict)
    loaded_records: dict[str, int] = field(default_factory=dict)
    cost_state: dict[str, Any] | None = None
    cost_states: int = 0
    custom_agents: dict[str, str] = field(default_factory=dict)
    memory_files: dict[str, dict[str, str]] = field(default_factory=dict)
    unknown: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    compaction_rows: list[dict[str, Any]] = field(default_factory=list)
    reply_index: dict[str, int] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)


@dataclass
class _Last:
    """What the last `conversation()` built, for the next one to extend (`ClaudeReader._extend`)."""

    leaf: str | None
    line: int
    rows: int
    converter: Converter
    start_line: int
    requests: list[Request]
    start_anchor: dict[str, Any] | None
    boundary_uuid: str | None


class ClaudeReader:
    """Incremental reader of one Claude Code transcript (see module doc for every rule).

    `feed(lines)` takes `(line_no, byte_offset, raw_bytes)` tuples of complete lines and never
    raises for bad content (bad lines become counted `Diagnostic`s); `conversation()` returns the
    frozen `Conversation` for everything fed so far (recomputed only after new lines).
    """

    def __init__(self, path: Path | None = None, parent: str | None = None,
                 subagent: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path) if path is not None else Path("<memory>")
        self.parent = parent
        self.subagent = dict(subagent) if subagent else None
        self._s = _State()
        self._cached: Conversation | None = None
        self._last: _Last | None = None
        self._cached_micro: list[Compaction] = []
        # the lists the last conversation holds (never changed once handed out) and copies of
        # them made ahead of the next append (`prepare`)
        self._handed: tuple[list[Any], list[Any]] | None = None
        self._spares = Spares()

    # ---- feeding -------------------------------------------------------------------------
    def feed(self, lines: Iterable[tuple[int, int, bytes]]) -> None:
        """Read complete lines; problems become diagnostics, never exceptions."""
        for line_no, offset, raw in lines:
            self._cached = None
            self._line(line_no, offset, raw)

    def _problem(self, kind: Problem, message: str, line_no: int, offset: int, text: str | None) -> None:
        self._s.counts[kind.value] += 1
        if self._s.counts[kind.value] <= 200:
            self._s.diagnostics.append(Diagnostic(kind, message, line_no, offset,
                                                  None if text is None else text[:EXCERPT_CHARS]))

    def _line(self, line_no: int, offset: int, raw: bytes) -> None:
        if not isinstance(raw, (bytes, bytearray)):
            return
        if isinstance(raw, OversizedLine):  # (a tailer's line over its cap: only its head was kept)
            self._problem(Problem.MALFORMED, f"line longer than {MAX_LINE_BYTES} bytes, not read", line_no, offset, None)
            return
        raw = bytes(raw).rstrip(b"\r\n")
        if not raw.strip():
            return
        if len(raw) > MAX_LINE_BYTES:
            self._problem(Problem.MALFORMED, f"line longer than {MAX_LINE_BYTES} bytes, not read", line_no, offset, None)
            return
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
            self._problem(Problem.INVALID_UTF8, "invalid UTF-8 (decoded with U+FFFD)", line_no, offset, text)
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            self._problem(Problem.MALFORMED, "not valid JSON (skipped)", line_no, offset, text)
            return
        if not isinstance(obj, dict):
            self._problem(Problem.NON_OBJECT, "not a JSON object (skipped)", line_no, offset, text)
            return
        try:
            self._row(obj, line_no)
        except (TypeError, ValueError, AttributeError, KeyError) as error:  # a row of unexpected shape
            self._problem(Problem.MALFORMED, f"row of unexpected shape ({type(error).__name__}) skipped", line_no, offset, text)

    def _unknown(self, group: str, name: str, size: int) -> None:
        counts = self._s.unknown.setdefault(group, {}).setdefault(name, [0, 0])
        counts[0] += 1
        counts[1] += size

    def _formats(self, row: dict[str, Any], kind: Any) -> None:
        """Record the 2.1.337 state rows this reader uses and count what it does not know
        (entry types, system subtypes, attachment kinds, content blocks: type, count, bytes)."""
        s = self._s
        if isinstance(row.get("version"), str):
            s.version = row["version"]
        if kind not in KNOWN_TYPES:
            self._unknown("entryTypes", str(kind), len(json.dumps(row, ensure_ascii=False)))
            return
        if kind == "api-request-shape":
            tools = (row.get("shape") or {}).get("tools") if isinstance(row.get("shape"), dict) else None
            if isinstance(tools, list):
                s.shape_tools = [t for t in tools if isinstance(t, dict)]
        elif kind == "cost-state":
            s.cost_state = {"totalCostUSD": row.get("totalCostUSD"), "modelUsage": row.get("modelUsage"),
                            "hasUnknownModelCost": row.get("hasUnknownModelCost")}
            s.cost_states += 1
        elif kind == "system" and _name(row.get("subtype")) not in KNOWN_SYSTEM_SUBTYPES:
            self._unknown("systemSubtypes", str(row.get("subtype")), len(json.dumps(row, ensure_ascii=False)))
        elif kind == "attachment" and isinstance(row.get("attachment"), dict):
            att = row["attachment"]
            atype = str(att.get("type"))
            if atype == "prompt_snapshot" and isinstance(att.get("systemPrompt"), list) and not row.get("isSidechain"):
                s.prompt_snapshot = [p for p in att["systemPrompt"] if isinstance(p, str)]
            elif atype == "deferred_tools_delta" and not row.get("isSidechain"):
                for name in att.get("addedNames") or ():
                    if isinstance(name, str):
                        s.deferred[name] = None
                for name in att.get("removedNames") or ():
                    s.deferred.pop(name, None)
            elif atype == "agent_listing_delta" and not row.get("isSidechain"):
                for line in att.get("addedLines") or ():
                    name, _, when = str(line).removeprefix("- ").partition(": ")
                    if name and name not in BUILTIN_AGENTS and name in (att.get("addedTypes") or ()):
                        s.custom_agents[name] = re.sub(r" \(Tools: [^)]*\)$", "", when)
                for name in att.get("removedTypes") or ():
                    s.custom_agents.pop(name, None)
            elif atype == "instructions" and not row.get("isSidechain"):
                for f in att.get("files") or ():
                    if isinstance(f, dict) and isinstance(f.get("content"), str):
                        s.memory_files[str(f.get("path"))] = {"type": str(f.get("type", "")), "content": f["content"]}
            elif atype == "deferred_tools_record":
                for entry in att.get("entries") or ():
                    if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                        s.loaded_records[entry["name"]] = len(json.dumps(entry))
            elif atype not in SENT_ATTACHMENTS and atype not in NOT_SENT_ATTACHMENTS:
                self._unknown("attachmentTypes", atype, len(json.dumps(att, ensure_ascii=False)))
        elif kind in ("user", "assistant") and isinstance(row.get("message"), dict):
            content = row["message"].get("content")
            for block in content if isinstance(content, list) else ():
                if not isinstance(block, dict):
                    continue
                inner = block.get("content") if block.get("type") == "tool_result" else None
                for b in [block, *(inner if isinstance(inner, list) else ())]:
                    if isinstance(b, dict) and _name(b.get("type")) not in KNOWN_BLOCKS:
                        self._unknown("contentBlocks", str(b.get("type")), len(json.dumps(b, ensure_ascii=False)))

    def _row(self, row: dict[str, Any], line_no: int) -> None:
        s = self._s
        kind = _name(row.get("type"))
        s.entries += 1
        self._formats(row, kind)
        if kind == "last-prompt":
            if isinstance(row.get("leafUuid"), str):
                s.leaf = row["leafUuid"]
                s.leaf_line = line_no
            return
        if kind in ("ai-title", "summary", "custom-title"):
            title = row.get("aiTitle") or row.get("title") or row.get("summary") or row.get("customTitle")
            if isinstance(title, str) and title.strip():
                s.title = title.strip()
            return
        uuid = row.get("uuid")
        if not isinstance(uuid, str):
            return  # queue-operation, mode, … (not sent, no uuid)
        if uuid in s.by_uuid:
            s.duplicates += 1
            return
        row["_line"] = line_no
        s.by_uuid[uuid] = row
        s.rows.append(row)
        if kind == "system" and row.get("subtype") == "compact_boundary" and not row.get("isSidechain"):
            s.compaction_rows.append(row)
        if isinstance(row.get("sessionId"), str) and s.session_id is None:
            s.session_id = row["sessionId"]
        if isinstance(row.get("cwd"), str):
            s.cwd = row["cwd"]
        if isinstance(row.get("agentId"), str) and s.agent_id is None:
            s.agent_id = row["agentId"]
        sidechain = row.get("isSidechain") is True
        if not sidechain or s.agent_id:
            s.last_main_uuid = uuid
            s.last_main_line = line_no
        message = row.get("message") if isinstance(row.get("message"), dict) else None
        if kind == "user" and s.first_prompt is None and message and not row.get("isMeta") and not row.get("isCompactSummary"):
            content = message.get("content")
            text = content if isinstance(content, str) else next(
                (b.get("text") for b in content or () if isinstance(b, dict) and b.get("type") == "text"), None) if isinstance(content, list) else None
            if isinstance(text, str) and text.strip() and not text.startswith("<"):
                s.first_prompt = text.strip().splitlines()[0][:200]
        if kind == "assistant" and message is not None:
            self._reply(row, message, line_no, sidechain)

    def _reply(self, row: dict[str, Any], message: dict[str, Any], line_no: int, sidechain: bool) -> None:
        s = self._s
        key = message.get("id") if isinstance(message.get("id"), str) else f"uuid:{row['uuid']}"
        model = message.get("model") if isinstance(message.get("model"), str) else None
        synthetic = model == SYNTHETIC_MODEL or row.get("isApiErrorMessage") is True
        usage = usage_of(message.get("usage"))
        known = s.replies.get(key)
        if known is not None:
            if known.sidechain and not sidechain and not s.agent_id:
                # a main-chain copy beats a side-chain replay of the same message.id (ccusage #913)
                s.replies[key] = _Reply(key, row["uuid"], [row], usage, model, False, synthetic,
                                        iso_seconds(row.get("timestamp")), miss_reason_of(message), line_no)
                s.touched.add(key)
                return
            if sidechain and not known.sidechain and not s.agent_id:
                return
            known.rows.append(row)
            known.usage = _max_usage(known.usage, usage)
            known.miss_reason = known.miss_reason or miss_reason_of(message)
            s.touched.add(key)
            return
        s.replies[key] = _Reply(key, row["uuid"], [row], usage, model, sidechain and not s.agent_id, synthetic,
                                iso_seconds(row.get("timestamp")), miss_reason_of(message), line_no)
        s.reply_index[key] = len(s.reply_order)
        s.reply_order.append(key)

    # ---- the frozen state ----------------------------------------------------------------
    def conversation(self) -> Conversation:
        """The `Conversation` after everything fed so far (see module doc): extended from the
        previous one when the rows read since only extend its chain (`_extend`: O(new rows),
        its `stable` prefix the same message objects), else built in full."""
        if self._cached is None:
            self._cached = self._extend() or self._build()
            self._s.touched.clear()
        return self._cached

    def prepare(self) -> None:
        """Copy now the lists the next append extends (the last conversation's messages, meta
        and requests: O(messages), while nothing waits; `ConversationLive.prepare`)."""
        if self._handed is not None and self._last is not None:
            self._spares.prepare([*self._handed, self._last.requests])

    def _leaf(self) -> str | None:
        """The last `last-prompt.leafUuid` when no main-chain row came after it (a turn in
        progress is newer than the previous turn's last-prompt), else the last main-chain row."""
        s = self._s
        return s.leaf if s.leaf in s.by_uuid and s.leaf_line > s.last_main_line else s.last_main_uuid

    def _extend(self) -> Conversation | None:
        """The conversation after rows that only extend the previous one's chain: its leaf's
        new rows (walked up to the previous leaf, every one read since, no compaction or
        microcompaction among them) converted onto the previous messages; None when that does
        not hold (a rewind, a compaction, a row from before: `_build` reads it in full)."""
        last = self._last
        if last is None:
            return None
        s = self._s
        leaf = self._leaf()
        collected: list[dict[str, Any]] = []
        uuid = leaf
        limit = len(s.rows) - last.rows + 1
        while uuid != last.leaf:
            row = s.by_uuid.get(uuid) if isinstance(uuid, str) else None
            if row is None or row.get("_line", 0) <= last.line or len(collected) > limit:
                return None
            if row.get("type") == "system" and row.get("subtype") in ("compact_boundary", "microcompact_boundary"):
                return None
            collected.append(row)
            uuid = row.get("parentUuid")
        converter = last.converter
        converter.mark()
        for row in reversed(collected):
            converter.add(row)
        requests = last.requests
        if s.touched or len(requests) < len(s.reply_order):
            requests = self._spares.copy(requests)  # (the previous conversation keeps its list)
            for key in s.touched:
                index = s.reply_index.get(key)
                if index is not None and index < len(requests):
                    requests[index] = self._request(index, key, converter.reply_at, last.start_line)
            for index in range(len(requests), len(s.reply_order)):
                requests.append(self._request(index, s.reply_order[index], converter.reply_at, last.start_line))
        self._last = _Last(leaf, s.rows[-1].get("_line", last.line) if s.rows else last.line, len(s.rows), converter,
                           last.start_line, requests, last.start_anchor, last.boundary_uuid)
        return self._conversation(converter, requests, list(s.diagnostics), last.boundary_uuid, last.start_anchor,
                                  leaf, None, stable=converter.first_changed)

    def _request(self, index: int, key: str, reply_at: Mapping[str, int], start_line: int) -> Request:
        """The neutral `Request` of reply `key` (position `index` in file order); its message
        index is None for a reply before the context's start (a kept message ran before the
        compaction)."""
        reply = self._s.replies[key]
        return Request(
            index=index, usage=reply.usage, entry_id=reply.first_uuid, timestamp=self._request_time(reply),
            model=reply.model, provider="anthropic",
            message_index=None if reply.line_no < start_line else reply_at.get(key),
            sidechain=reply.sidechain, synthetic=reply.synthetic, miss_reason=reply.miss_reason)

    def _chain(self) -> tuple[list[dict[str, Any]], dict[str, Any] | None, int]:
        """Rows from the context start to the leaf, the last compact_boundary on it, missing parents."""
        s = self._s
        leaf = self._leaf()
        chain: list[dict[str, Any]] = []
        seen: set[str] = set()
        missing = 0
        uuid = leaf
        while isinstance(uuid, str) and uuid not in seen:
            row = s.by_uuid.get(uuid)
            if row is None:
                missing += 1
                break
            seen.add(uuid)
            chain.append(row)
            if row.get("type") == "system" and row.get("subtype") == "compact_boundary":
                break
            uuid = row.get("parentUuid")
        chain.reverse()
        boundary = chain[0] if chain and chain[0].get("subtype") == "compact_boundary" else None
        if boundary is not None:
            meta = boundary.get("compactMetadata") if isinstance(boundary.get("compactMetadata"), dict) else {}
            kept = meta.get("preservedMessages") if isinstance(meta.get("preservedMessages"), dict) else {}
            uuids = [u for u in kept.get("uuids") or () if isinstance(u, str) and u in s.by_uuid]
            rest = chain[1:]
            anchor = kept.get("anchorUuid")
            at = next((i + 1 for i, r in enumerate(rest) if r.get("uuid") == anchor), 1 if rest and rest[0].get("isCompactSummary") else 0)
            chain = [boundary, *rest[:at], *(s.by_uuid[u] for u in uuids), *rest[at:]]
        return chain, boundary, missing

    def _build(self) -> Conversation:
        s = self._s
        chain, boundary, missing = self._chain()
        diagnostics = list(s.diagnostics)
        if missing:
            diagnostics.append(Diagnostic(Problem.MISSING_PARENT, "the chain from the leaf names a parent uuid that is not in the file; the context starts there"))
        cleared_tools: set[str] = set()
        cleared_attachments: set[str] = set()
        micro: list[Compaction] = []
        for row in chain:
            if row.get("type") == "system" and row.get("subtype") == "microcompact_boundary":
                meta = row.get("microcompactMetadata") if isinstance(row.get("microcompactMetadata"), dict) else {}
                cleared_tools |= {t for t in meta.get("compactedToolIds") or () if isinstance(t, str)}
                cleared_attachments |= {t for t in meta.get("clearedAttachmentUUIDs") or () if isinstance(t, str)}
                micro.append(Compaction(row.get("uuid"), iso_seconds(row.get("timestamp")), "micro",
                                        meta.get("preTokens") if isinstance(meta.get("preTokens"), int) else None))
        converter = Converter(cleared_tools, cleared_attachments, s.replies)
        for row in chain:
            converter.add(row)
        start_line = boundary.get("_line", 0) if boundary else 0
        requests = [self._request(index, key, converter.reply_at, start_line) for index, key in enumerate(s.reply_order)]
        start_anchor = self._start_anchor() if boundary is not None else None
        boundary_uuid = boundary.get("uuid") if boundary else None
        self._last = _Last(chain[-1].get("uuid") if chain else None, s.rows[-1].get("_line", 0) if s.rows else 0,
                           len(s.rows), converter, start_line, requests, start_anchor, boundary_uuid)
        return self._conversation(converter, requests, diagnostics, boundary_uuid, start_anchor,
                                  chain[-1].get("uuid") if chain else None, micro, stable=0, boundary=boundary)

    def _conversation(self, converter: Converter, requests: list[Request], diagnostics: list[Any],
                      boundary_uuid: str | None, start_anchor: dict[str, Any] | None, leaf: str | None,
                      micro: list[Compaction] | None, *, stable: int, boundary: dict[str, Any] | None = None) -> Conversation:
        """The frozen `Conversation` of the converted messages, the requests and the state
        (`micro`: the chain's microcompactions, None: those of the last full build)."""
        s = self._s
        if s.duplicates:
            diagnostics.append(Diagnostic(Problem.DUPLICATE_ID, f"{s.duplicates} rows repeated an earlier uuid (counted once, the first kept)"))
        if boundary is None and boundary_uuid is not None:
            boundary = s.by_uuid.get(boundary_uuid)
        # every compaction of the file (the chain only reaches the last one)
        all_compactions = []
        for row in s.compaction_rows:
            meta = row.get("compactMetadata") if isinstance(row.get("compactMetadata"), dict) else {}
            trigger = meta.get("trigger") if meta.get("trigger") in ("manual", "auto") else "manual"
            all_compactions.append(Compaction(row.get("uuid"), iso_seconds(row.get("timestamp")), trigger,
                                              meta.get("preTokens") if isinstance(meta.get("preTokens"), int) else None))
        if micro is not None:
            self._cached_micro = micro
        model = next((r.model for r in reversed(requests) if not r.synthetic and r.model), None)
        window = claude_window(model, s.version)
        unknown = {group: {name: {"count": c, "bytes": b} for name, (c, b) in sorted(names.items())}
                   for group, names in sorted(s.unknown.items())}
        for group, names in unknown.items():
            for name, n in names.items():
                diagnostics.append(UnknownFormat(group, name, n["count"], n["bytes"]))
        extra: dict[str, Any] = {
            "version": s.version,
            "window": window.to_json(),
            "unknownFormats": unknown,
            # Claude Code 2.1.337's own records (None when the transcript has none, e.g. 2.1.197)
            "promptSnapshot": list(s.prompt_snapshot) if s.prompt_snapshot is not None else None,
            "requestTools": [{"name": str(t.get("name")), "jsonChars": len(json.dumps(t))} for t in s.shape_tools]
            if s.shape_tools is not None else None,
            "deferredTools": list(s.deferred),
            "loadedToolRecords": dict(s.loaded_records),
            "customAgents": [{"agentType": k, "whenToUse": v} for k, v in s.custom_agents.items()],
            "memoryFiles": [{"path": k, **v} for k, v in s.memory_files.items()],
            "costState": s.cost_state,
            "lines": dict(s.counts),
            "duplicateRows": s.duplicates,
            "compactBoundary": boundary_uuid,
            "postTokens": ((boundary or {}).get("compactMetadata") or {}).get("postTokens") if boundary else None,
            "agentId": s.agent_id,
            "firstPrompt": s.first_prompt,
            # a subagent: its .meta.json; `toolUseId` is the parent's Agent tool call
            "subagent": self.subagent,
            "parentToolUseId": (self.subagent or {}).get("toolUseId"),
            "startAnchor": start_anchor,
        }
        handed = self._handed
        if handed is not None and stable > 0:
            # the previous lists up to `stable`, then the converter's new tail (O(new) when
            # `prepare` copied them after the last paint)
            messages, metas = self._spares.copy(handed[0]), self._spares.copy(handed[1])
            del messages[stable:], metas[stable:]
            messages.extend(converter.messages[stable:])
            metas.extend(converter.metas[stable:])
        else:
            messages, metas = list(converter.messages), list(converter.metas)
        self._handed = (messages, metas)
        return Conversation(
            agent=CLAUDE_CODE, path=self.path, capabilities=CAPABILITIES,
            messages=messages, meta=metas, requests=requests,
            compactions=tuple([*all_compactions, *self._cached_micro]), session_id=s.session_id,
            title=s.title or s.first_prompt, cwd=s.cwd, model=model, provider="anthropic",
            context_window=window.tokens if model else None, leaf_id=leaf, entries=s.entries,
            diagnostics=tuple(diagnostics), parent=self.parent, extra=extra, stable=stable,
        )

    def _start_anchor(self) -> dict[str, Any] | None:
        """The session's first real main-chain request and the messages it carried (walked from
        its first row up to the root): the fallback for inferring the system prompt + tools when
        no request has run since the last compaction (format doc §6.3). JSON-safe:
        `{entryId, promptTokens, messageTokens}`, None when there is no such request."""
        from ds4sessions.agents.claude.views import messages_tokens_of

        s = self._s
        reply = next((r for k in s.reply_order if not (r := s.replies[k]).synthetic and not r.sidechain), None)
        if reply is None:
            return None
        chain: list[dict[str, Any]] = []
        seen: set[str] = set()
        uuid = reply.rows[0].get("parentUuid")
        while isinstance(uuid, str) and uuid not in seen and uuid in s.by_uuid:
            seen.add(uuid)
            chain.append(s.by_uuid[uuid])
            uuid = s.by_uuid[uuid].get("parentUuid")
        chain.reverse()
        messages, _, _ = convert(chain, set(), set(), s.replies)
        return {"entryId": reply.first_uuid, "promptTokens": reply.usage.prompt_tokens,
                "messageTokens": messages_tokens_of(messages)}

    def _request_time(self, reply: _Reply) -> float | None:
        """When the request was sent: the prompt / tool-result row the reply answers (walk up the
        parents past the reply's own streamed rows), else the reply's time (format doc §3)."""
        s = self._s
        row = reply.rows[0]
        for _ in range(64):
            parent = s.by_uuid.get(row.get("parentUuid")) if isinstance(row.get("parentUuid"), str) else None
            if parent is None:
                break
            if parent.get("type") != "assistant":
                t = iso_seconds(parent.get("timestamp"))
                return t if t is not None else reply.timestamp
            row = parent
        return reply.timestamp

    @property
    def diagnostics_total(self) -> int:
        """Problems counted so far (every kind)."""
        return sum(self._s.counts.values())


# ---- conversion to Pi-shaped messages -------------------------------------------------------

def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    out = []
    for block in content or () if isinstance(content, list) else ():
        if isinstance(block, dict):
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                out.append({"type": "text", "text": block["text"]})
            elif block.get("type") == "image":
                out.append({"type": "image", "data": "", "mimeType": str((block.get("source") or {}).get("media_type", "image/png")) if isinstance(block.get("source"), dict) else "image/png"})
    return out


def attachment_text(att: Mapping[str, Any], rendered: Any = None) -> str | None:
    """The text Claude Code sends for an attachment.

    Claude Code 2.1.337 writes it in the row: `rendered[].content` (joined by blank lines; its
    `renderedRole` says whether it rides as a system or user block). Older rows (2.1.197) have no
    `rendered`; then, approximately (the generator's request log): agent listings as "Available
    agent types…" lines, skill listings as their content, a file as "Called the Read tool with the
    following input: … Result: …". None for a kind that is never sent (`NOT_SENT_ATTACHMENTS`);
    "[other: <type>]" for a kind this reader does not know (never its raw JSON)."""
    kind = _name(att.get("type"))
    if kind in NOT_SENT_ATTACHMENTS:
        return None
    if isinstance(rendered, list):
        parts = [r["content"] for r in rendered if isinstance(r, Mapping) and isinstance(r.get("content"), str)]
        if parts:
            return "\n\n".join(parts)
    if kind == "skill_listing" and isinstance(att.get("content"), str):
        return "The following skills are available for use with the Skill tool:\n\n" + att["content"]
    if kind == "agent_listing_delta":
        lines = [x for x in att.get("addedLines") or () if isinstance(x, str)]
        return "Available agent types for the Agent tool:\n" + "\n".join(lines)
    if kind == "file":
        content = att.get("content")
        body = ""
        if isinstance(content, dict):
            file = content.get("file") if isinstance(content.get("file"), dict) else {}
            body = str(file.get("content", "")) if file else json.dumps(content, ensure_ascii=False)
        return (f"Called the Read tool with the following input: {json.dumps({'file_path': att.get('filename')})}\n"
                f"Result of calling the Read tool:\n{body}")
    if kind == "instructions":
        files = [f for f in att.get("files") or () if isinstance(f, Mapping)]
        return "\n\n".join(f"Contents of {f.get('path')}:\n\n{f.get('content', '')}" for f in files)
    return f"[other: {kind}]"


ATTACHMENT_CATEGORY = {"skill_listing": "skills", "nested_memory": "memory_files", "memory": "memory_files",
                       "claude_md": "memory_files", "instructions": "memory_files"}

BUILTIN_AGENTS = {"claude", "Explore", "general-purpose", "Plan", "statusline-setup"}
"""Claude Code's built-in agent types (2.1.197 sample MAIN:4; the same five in 2.1.337's listings).
`/context` lists only other agents under "Custom agents", so a listing of built-ins alone is an
attachment in `messages`."""


def attachment_category(att: Mapping[str, Any]) -> str:
    """The `/context` category of an attachment: skills, memory files, custom agents (an agent
    listing that adds a non-built-in type), else "attachments"."""
    kind = str(att.get("type", "?"))
    if kind not in SENT_ATTACHMENTS:
        return "attachments"
    if kind == "agent_listing_delta":
        added = {t for t in att.get("addedTypes") or () if isinstance(t, str)}
        return "custom_agents" if added - BUILTIN_AGENTS else "attachments"
    return ATTACHMENT_CATEGORY.get(kind, "attachments")


class Converter:
    """Rows of the context chain → Pi-shaped messages, their `MessageMeta`, and reply key → index
    of its message (see `convert`), one row at a time (`add`), so a live reader converts only the
    rows an append brought. A message is never changed once made: an assistant row that joins
    the last message (the same `message.id`) replaces it with a new dict; `first_changed` is the
    lowest index replaced or added since it was last reset (`mark`)."""

    def __init__(self, cleared_tools: set[str], cleared_attachments: set[str], replies: Mapping[str, _Reply]) -> None:
        self.cleared_tools, self.cleared_attachments, self.replies = cleared_tools, cleared_attachments, replies
        self.messages: list[dict[str, Any]] = []
        self.metas: list[MessageMeta] = []
        self.reply_at: dict[str, int] = {}
        self.tool_names: dict[str, str] = {}
        self.current_key: str | None = None
        self.first_changed = 0

    def mark(self) -> None:
        """Start counting changes afresh (`first_changed` = the current length)."""
        self.first_changed = len(self.messages)

    def _append(self, message: dict[str, Any], meta: MessageMeta) -> None:
        self.messages.append(message)
        self.metas.append(meta)

    def add(self, row: Mapping[str, Any]) -> None:
        """Convert one row of the chain (rows in chain order)."""
        messages = self.messages
        kind = _name(row.get("type"))
        uuid = row.get("uuid")
        message = row.get("message") if isinstance(row.get("message"), dict) else None
        if kind == "assistant" and message is not None:
            key = message.get("id") if isinstance(message.get("id"), str) else f"uuid:{uuid}"
            blocks = []
            for block in message.get("content") or () if isinstance(message.get("content"), list) else ():
                if not isinstance(block, dict):
                    continue
                btype = _name(block.get("type"))
                if btype == "text" and isinstance(block.get("text"), str):
                    blocks.append({"type": "text", "text": block["text"]})
                elif btype == "thinking":
                    blocks.append({"type": "thinking", "thinking": str(block.get("thinking", ""))})
                elif btype == "redacted_thinking":
                    blocks.append({"type": "thinking", "thinking": str(block.get("data", "")), "redacted": True})
                elif btype == "tool_use":
                    tool_id, name = str(block.get("id", "")), str(block.get("name", "?"))
                    self.tool_names[tool_id] = name
                    blocks.append({"type": "toolCall", "id": tool_id, "name": name,
                                   "arguments": block.get("input") if isinstance(block.get("input"), dict) else {}})
                elif btype not in KNOWN_BLOCKS:
                    blocks.append({"type": "text", "text": f"[other: {btype}]"})  # counted in unknownFormats
            if key == self.current_key and messages and messages[-1].get("role") == "assistant":
                last = messages[-1]
                messages[-1] = {**last, "content": [*last["content"], *blocks]}  # (a new message: never changed in place)
                self.first_changed = min(self.first_changed, len(messages) - 1)
                return
            self.current_key = key
            reply = self.replies.get(key)
            if key not in self.reply_at:
                self.reply_at[key] = len(messages)
            self._append({"role": "assistant", "content": blocks, "model": message.get("model"),
                          "stopReason": message.get("stop_reason"), "timestamp": row.get("timestamp"),
                          **({"synthetic": True} if reply is not None and reply.synthetic else {})},
                         MessageMeta(uuid, source="synthetic" if reply is not None and reply.synthetic else None))
            return
        self.current_key = None
        if kind == "user" and message is not None:
            content = message.get("content")
            if row.get("isCompactSummary"):
                text = "".join(b["text"] for b in _text_blocks(content))
                self._append({"role": "compactionSummary", "summary": text, "timestamp": row.get("timestamp")},
                             MessageMeta(uuid, category="compaction", source="isCompactSummary"))
                return
            texts: list[dict[str, Any]] = []
            for block in content if isinstance(content, list) else [content]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    tool_id = str(block.get("tool_use_id", ""))
                    name = self.tool_names.get(tool_id, "?")
                    cleared = tool_id in self.cleared_tools
                    body = [{"type": "text", "text": CLEARED_TOOL_RESULT}] if cleared else _text_blocks(block.get("content"))
                    result = row.get("toolUseResult") if isinstance(row.get("toolUseResult"), dict) else {}
                    source = f"subagent:{result['agentId']}" if isinstance(result.get("agentId"), str) else None
                    if cleared:
                        source = "microcompact:cleared"
                    self._append({"role": "toolResult", "toolCallId": tool_id, "toolName": name, "content": body,
                                  "isError": block.get("is_error") is True, "timestamp": row.get("timestamp")},
                                 MessageMeta(uuid, tool=name, source=source))
                else:
                    texts.extend(_text_blocks([block] if isinstance(block, dict) else block))
            if texts:
                self._append({"role": "user", "content": texts, "timestamp": row.get("timestamp")},
                             MessageMeta(uuid, source="isMeta" if row.get("isMeta") else None))
            return
        if kind == "system" and row.get("subtype") == LOCAL_COMMAND and isinstance(row.get("content"), str):
            if row["content"]:
                self._append({"role": "user", "content": [{"type": "text", "text": row["content"]}],
                              "timestamp": row.get("timestamp")}, MessageMeta(uuid, source=LOCAL_COMMAND_SOURCE))
            return
        if kind == "attachment" and isinstance(row.get("attachment"), dict):
            if uuid in self.cleared_attachments:
                return
            att = row["attachment"]
            atype = str(att.get("type", "?"))
            text = attachment_text(att, row.get("rendered"))
            if text is None:
                return  # a state record, never sent (NOT_SENT_ATTACHMENTS)
            other = atype not in SENT_ATTACHMENTS
            self._append({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": row.get("timestamp")},
                         MessageMeta(uuid, category=attachment_category(att),
                                     source=f"attachment:other: {atype}" if other else f"attachment:{atype}"))


def convert(chain: Sequence[Mapping[str, Any]], cleared_tools: set[str], cleared_attachments: set[str],
            replies: Mapping[str, _Reply]) -> tuple[list[dict[str, Any]], list[MessageMeta], dict[str, int]]:
    """Rows of the context chain → (Pi-shaped messages, their `MessageMeta`, reply key → index of
    its message). Assistant rows sharing `message.id` become one message; tool_result blocks
    become `toolResult` messages with the calling tool's name; attachments are user messages
    whose meta names their category (`skills`, `custom_agents`, `memory_files`, else
    `attachments`) and source `attachment:<type>`; a `system/local_command` row is a user message
    of its content, wrapper included, with source `system:local_command` (Claude Code 2.1.197
    `normalizeMessagesForAPI`: module doc). (`Converter`, all rows at once.)"""
    converter = Converter(cleared_tools, cleared_attachments, replies)
    for row in chain:
        converter.add(row)
    return converter.messages, converter.metas, converter.reply_at


def read_lines(path: Path) -> Iterable[tuple[int, int, bytes]]:
    """`(line_no, offset, raw)` of every line of `path` (the last one even without a newline),
    streamed by `ingest.limits.iter_lines` with this reader's cap: a line longer than
    `MAX_LINE_BYTES` comes as an `OversizedLine` (its head), never whole in memory, as the
    Claude Code view's tailer gives it. Raises OSError when the file cannot be read."""
    with open(path, "rb") as f:
        for line_no, offset, raw, _ in iter_lines(f, MAX_LINE_BYTES):
            yield line_no, offset, raw


def read_transcript(path: Path, parent: str | None = None) -> Conversation:
    """Read a whole transcript at once. Raises OSError when the file cannot be read."""
    reader = ClaudeReader(path, parent=parent)
    reader.feed(read_lines(Path(path)))
    return reader.conversation()
