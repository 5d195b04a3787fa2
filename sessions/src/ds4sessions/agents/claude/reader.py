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
import os
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
    listed,
    mapped,
    Capabilities,
    Compaction,
    Conversation,
    MessageMeta,
    Request,
    Usage,
)
from ds4sessions.ingest.diagnostics import EXCERPT_CHARS, Diagnostic, Problem
from ds4sessions.ingest.limits import OversizedLine, iter_lines, line_length

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


def _orjson_loads(raw: bytes) -> Any:
    """`orjson.loads` (a line parsed once, in C); without orjson, the stdlib's (issue 36)."""
    return _ORJSON(raw)


try:
    from orjson import loads as _ORJSON
except ImportError:  # pragma: no cover - orjson is a dependency; the stdlib is the fallback
    _ORJSON = json.loads


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
    # (`type(...) is dict` first: `isinstance` against `typing.Mapping` costs ~1.5 µs)
    if type(raw) is not dict and not isinstance(raw, Mapping):
        return Usage()
    split = raw.get("cache_creation")
    if type(split) is not dict and not isinstance(split, Mapping):
        split = {}
    return Usage(
        input=_int(raw.get("input_tokens")),
        cache_read=_int(raw.get("cache_read_input_tokens")),
        cache_write=_int(raw.get("cache_creation_input_tokens")),
        output=_int(raw.get("output_tokens")),
        cache_write_5m=_int(split.get("ephemeral_5m_input_tokens")),
        cache_write_1h=_int(split.get("ephemeral_1h_input_tokens")),
    )


def _max_usage(a: Usage, b: Usage) -> Usage:
    if a == b:
        return a  # (a reply's rows usually repeat one usage)
    return Usage(max(a.input, b.input), max(a.cache_read, b.cache_read), max(a.cache_write, b.cache_write),
                 max(a.output, b.output), max(a.cache_write_5m, b.cache_write_5m),
                 max(a.cache_write_1h, b.cache_write_1h), max(a.reasoning, b.reasoning))


def miss_reason_of(message: Mapping[str, Any]) -> str | None:
    """`message.diagnostics.cache_miss_reason.type`, None when absent or null."""
    diag = message.get("diagnostics")
    if diag is None:
        return None
    if isinstance(diag, Mapping):
        reason = diag.get("cache_miss_reason")
        if isinstance(reason, Mapping) and isinstance(reason.get("type"), str):
            return reason["type"]
    return None


@dataclass(slots=True)
class _Reply:
    """One assistant message folded from its streamed rows (its first row's uuid; the rows
    themselves are not kept: `_State.recs` has each row's parent and place in the file)."""

    key: str
    first_uuid: str | None
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


REC_LINE, REC_OFFSET, REC_LENGTH, REC_PARENT, REC_ASSISTANT, REC_TIME = range(6)
"""The fields of a row's record in `_State.recs` (a tuple): its line number, byte offset and
length in the file (to read it again), `parentUuid` (a string, else None), whether it is an
`assistant` row, and its `timestamp` as written (parsed only when a request's time needs it)."""

SHARED_TEXT_CHARS = 256
"""Texts of at least this many characters are held once per context (`Converter._share`)."""

SETTLE_ROWS = 2048
"""Rows kept whole between two settles (`ClaudeReader._settle`): a longer feed converts the rows
read so far onto the context and then keeps of them only their records (issue 36: a reader's
state is numbers and offsets, not the parsed rows of the whole file)."""


@dataclass
class _State:
    recs: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    fresh: dict[str, dict[str, Any]] = field(default_factory=dict)
    row_count: int = 0
    last_row_line: int = 0
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
    compactions: list[Compaction] = field(default_factory=list)
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
    missing: int = 0
    post_tokens: Any = None
    awaited: frozenset[str] = frozenset()  # uuids the chain names but the file did not hold yet
    reorder: tuple[bool, Any] | None = None  # `_chain`'s (nothing after the boundary, anchor not read yet)


class ClaudeReader:
    """Incremental reader of one Claude Code transcript (see module doc for every rule).

    `feed(lines)` takes `(line_no, byte_offset, raw_bytes)` tuples of complete lines and never
    raises for bad content (bad lines become counted `Diagnostic`s); `conversation()` returns the
    frozen `Conversation` for everything fed so far (recomputed only after new lines).

    Memory (issue 36): each line is parsed once (orjson; what it refuses goes to the stdlib, as
    before); a row is kept whole only until the next settle (every `SETTLE_ROWS` rows and at each
    `conversation()`), which converts the rows that extend the context onto its messages; after
    that only the row's record is kept (`REC_*`: line, offset, length, parent, time). A row
    needed again (a compaction's preserved messages, a rewind to another branch, the session's
    first request) is read again from the file at its offset and checked by its uuid. When the
    lines fed do not come from `path` at their offsets (the offsets do not follow one another,
    or `path` is not a file: lines fed by hand), every row is kept whole, as before.
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
        self._expect: int | None = None  # the offset the next line should have (offsets checked)
        self._reread = self.path.is_file()  # rows may be read again from `path` (else kept whole)
        self._settled = True  # nothing fed since the last settle
        self._stable: int | None = None  # messages kept since the conversation handed out last
        self._anchor: tuple[Any, dict[str, Any] | None] | None = None  # (reply key, start anchor)
        self._open_times: set[str] = set()  # replies whose request time may change (a parent not read yet)
        self._file: Any = None  # the file's descriptor, open while a settle reads rows again (`_row_of`)
        self._in_settle = False
        self._linear = True
        self._awaited = set()

    # ---- feeding -------------------------------------------------------------------------
    def feed(self, lines: Iterable[tuple[int, int, bytes]]) -> None:
        """Read complete lines `(line_no, byte offset, raw bytes)`; problems become diagnostics,
        never exceptions. Every `SETTLE_ROWS` rows the rows read so far are settled onto the
        context (class doc)."""
        s = self._s
        for line_no, offset, raw in lines:
            self._cached = None
            self._settled = False
            if self._reread:
                if self._expect is not None and offset != self._expect:
                    self._reread = False  # (not the file's own offsets: keep every row whole)
                if isinstance(raw, (bytes, bytearray)):
                    self._expect = offset + line_length(raw) + (0 if raw.endswith(b"\n") else 1)
            self._line(line_no, offset, raw)
            if len(s.fresh) >= SETTLE_ROWS and self._reread:
                self._settle()

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
        if raw[:1] == b"{":
            try:
                obj = _orjson_loads(raw)
            except Exception:  # (orjson's refusals: the stdlib below decides, as before)
                obj = None
            if type(obj) is dict:
                try:
                    self._row(obj, line_no, offset, len(raw))
                except (TypeError, ValueError, AttributeError, KeyError) as error:  # a row of unexpected shape
                    self._problem(Problem.MALFORMED, f"row of unexpected shape ({type(error).__name__}) skipped",
                                  line_no, offset, raw.decode("utf-8", errors="replace"))
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
            self._row(obj, line_no, offset, len(raw))
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
                for name in listed(att.get("addedNames")):
                    if isinstance(name, str):
                        s.deferred[name] = None
                for name in listed(att.get("removedNames")):
                    if isinstance(name, str):
                        s.deferred.pop(name, None)
            elif atype == "agent_listing_delta" and not row.get("isSidechain"):
                for line in listed(att.get("addedLines")):
                    name, _, when = str(line).removeprefix("- ").partition(": ")
                    if name and name not in BUILTIN_AGENTS and name in listed(att.get("addedTypes")):
                        s.custom_agents[name] = re.sub(r" \(Tools: [^)]*\)$", "", when)
                for name in listed(att.get("removedTypes")):
                    if isinstance(name, str):
                        s.custom_agents.pop(name, None)
            elif atype == "instructions" and not row.get("isSidechain"):
                for f in listed(att.get("files")):
                    if isinstance(f, dict) and isinstance(f.get("content"), str):
                        s.memory_files[str(f.get("path"))] = {"type": str(f.get("type", "")), "content": f["content"]}
            elif atype == "deferred_tools_record":
                for entry in listed(att.get("entries")):
                    if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                        s.loaded_records[entry["name"]] = len(json.dumps(entry))
            elif atype not in SENT_ATTACHMENTS and atype not in NOT_SENT_ATTACHMENTS:
                self._unknown("attachmentTypes", atype, len(json.dumps(att, ensure_ascii=False)))
        elif kind in ("user", "assistant") and isinstance(row.get("message"), dict):
            content = row["message"].get("content")
            for block in content if type(content) is list else ():
                if type(block) is not dict:
                    continue
                btype = block.get("type")
                if btype == "tool_result" and type(block.get("content")) is list:
                    blocks: Iterable[Any] = [block, *block["content"]]
                elif type(btype) is str and btype in KNOWN_BLOCKS:
                    continue  # (the usual block: known, nothing inside to look at)
                else:
                    blocks = (block,)
                for b in blocks:
                    if type(b) is dict and _name(b.get("type")) not in KNOWN_BLOCKS:
                        self._unknown("contentBlocks", str(b.get("type")), len(json.dumps(b, ensure_ascii=False)))

    def _row(self, row: dict[str, Any], line_no: int, offset: int = 0, length: int = 0) -> None:
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
        if uuid in s.recs:
            s.duplicates += 1
            return
        parent = row.get("parentUuid")
        s.recs[uuid] = (line_no, offset, length, parent if isinstance(parent, str) else None, kind == "assistant",
                        None if kind == "assistant" else row.get("timestamp"))
        s.fresh[uuid] = row
        s.row_count += 1
        s.last_row_line = line_no
        if kind == "system" and row.get("subtype") == "compact_boundary" and not row.get("isSidechain"):
            meta = row.get("compactMetadata") if isinstance(row.get("compactMetadata"), dict) else {}
            trigger = meta.get("trigger") if meta.get("trigger") in ("manual", "auto") else "manual"
            s.compactions.append(Compaction(uuid, iso_seconds(row.get("timestamp")), trigger,
                                            meta.get("preTokens") if isinstance(meta.get("preTokens"), int) else None))
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
                s.replies[key] = _Reply(key, row["uuid"], usage, model, False, synthetic,
                                        iso_seconds(row.get("timestamp")), miss_reason_of(message), line_no)
                s.touched.add(key)
                return
            if sidechain and not known.sidechain and not s.agent_id:
                return
            known.usage = _max_usage(known.usage, usage)
            known.miss_reason = known.miss_reason or miss_reason_of(message)
            s.touched.add(key)
            return
        s.replies[key] = _Reply(key, row["uuid"], usage, model, sidechain and not s.agent_id, synthetic,
                                iso_seconds(row.get("timestamp")), miss_reason_of(message), line_no)
        s.reply_index[key] = len(s.reply_order)
        s.reply_order.append(key)

    # ---- the frozen state ----------------------------------------------------------------
    def conversation(self) -> Conversation:
        """The `Conversation` after everything fed so far (see module doc): extended from the
        previous one when the rows read since only extend its chain (`_extend`: O(new rows),
        its `stable` prefix the same message objects), else built in full."""
        if self._cached is None:
            self._settle()
            last = self._last
            assert last is not None
            stable = 0 if self._stable is None else self._stable
            self._stable = None
            self._cached = self._conversation(last.converter, last.requests, last.leaf, stable=stable)
        return self._cached

    def _settle(self) -> None:
        """Convert the rows fed since the last settle onto the context (`_extend`, else
        `_build`), bring the requests up to date, then keep of those rows only their records
        (when rows can be read again from the file: class doc)."""
        if self._settled and self._last is not None:
            return
        s = self._s
        self._in_settle = True  # (`_row_of` keeps one descriptor open until the end of the settle)
        try:
            changed = self._extend()
            if changed is None:
                self._build()
                self._stable = 0
            else:
                self._stable = changed if self._stable is None else min(self._stable, changed)
        finally:
            self._in_settle = False
            if self._file is not None:
                os.close(self._file)
                self._file = None
        s.touched.clear()
        if self._reread and s.fresh:
            # the rows are dropped only when the file holds the last of them where it was fed
            # (lines fed from elsewhere, or offsets not the file's: every row is kept whole)
            last = next(reversed(s.fresh))
            kept = s.fresh.pop(last)
            if self._row_of(last) is None:
                self._reread = False
            s.fresh[last] = kept
        if self._reread:
            s.fresh.clear()
        self._settled = True

    def prepare(self) -> None:
        """Copy now the lists the next append extends (the last conversation's messages, meta
        and requests: O(messages), while nothing waits; `ConversationLive.prepare`)."""
        if self._handed is not None and self._last is not None:
            self._spares.prepare([*self._handed, self._last.requests])

    def _leaf(self) -> str | None:
        """The last `last-prompt.leafUuid` when no main-chain row came after it (a turn in
        progress is newer than the previous turn's last-prompt), else the last main-chain row."""
        s = self._s
        return s.leaf if s.leaf in s.recs and s.leaf_line > s.last_main_line else s.last_main_uuid

    def _row_of(self, uuid: Any) -> dict[str, Any] | None:
        """The row `uuid` whole: kept since the last settle, else read again from the file at
        its offset (checked: the line there must be that row); None when unknown or unreadable."""
        if not isinstance(uuid, str):
            return None
        s = self._s
        row = s.fresh.get(uuid)
        if row is not None:
            return row
        rec = s.recs.get(uuid)
        if rec is None:
            return None  # (a row not kept is one dropped while the offsets were the file's: read it)
        raw = b""
        try:
            fd = self._file if self._file is not None else os.open(self.path, os.O_RDONLY)
            if self._in_settle:
                self._file = fd
            try:
                raw = os.pread(fd, rec[REC_LENGTH], rec[REC_OFFSET])  # (unbuffered: the bytes there now)
            finally:
                if fd is not self._file:
                    os.close(fd)
            row = _orjson_loads(raw)
        except Exception:
            try:
                row = json.loads(raw.decode("utf-8", errors="replace"))
            except Exception:
                return None
        if type(row) is not dict or row.get("uuid") != uuid:
            return None  # (the file changed under the reader: the tailer starts it over)
        return row

    def _extend(self) -> int | None:
        """Convert the rows read since the last settle when they only extend its chain: its
        leaf's new rows (walked up to the previous leaf, every one read since, no compaction or
        microcompaction among them) converted onto the previous messages. Returns the lowest
        message index changed (`Converter.first_changed`); None when that does not hold (a
        rewind, a compaction, a row from before: `_build` reads it in full)."""
        last = self._last
        if last is None:
            return None
        s = self._s
        if last.awaited and any(u in s.recs for u in last.awaited):
            return None  # a row the context's start waited for came (a parent written later)
        leaf = self._leaf()
        collected: list[dict[str, Any]] = []
        uuid = leaf
        limit = s.row_count - last.rows + 1
        converter = last.converter
        back = None  # an earlier row of this context the new rows continue from (not the leaf)
        while uuid != last.leaf:
            row = s.fresh.get(uuid) if isinstance(uuid, str) else None
            if row is None or s.recs[uuid][REC_LINE] <= last.line:
                if converter.linear and converter.has(uuid):
                    back = uuid
                    break
                return None
            if len(collected) > limit:
                return None
            if row.get("type") == "system" and row.get("subtype") in ("compact_boundary", "microcompact_boundary"):
                return None
            collected.append(row)
            uuid = row.get("parentUuid")
        if last.reorder is not None and collected:
            empty, anchor = last.reorder
            if empty or (isinstance(anchor, str) and any(r.get("uuid") == anchor for r in collected)):
                return None  # (the preserved rows would sit elsewhere among these rows: `_chain`)
        converter.mark()
        if back is not None:
            converter.rewind(back)
        for row in reversed(collected):
            converter.add(row)
        requests = last.requests
        redo = s.touched | converter.changed_keys | self._open_times  # (open: a parent may have come since)
        if redo or len(requests) < len(s.reply_order):
            requests = self._spares.copy(requests)  # (the previous conversation keeps its list)
            for key in redo:
                index = s.reply_index.get(key)
                if index is not None and index < len(requests):
                    requests[index] = self._request(index, key, converter.reply_at, last.start_line)
            for index in range(len(requests), len(s.reply_order)):
                requests.append(self._request(index, s.reply_order[index], converter.reply_at, last.start_line))
        # (the session's first request may have come since, or the rows before it: as `_build`;
        # cached while it is the same request and its rows reached the root)
        anchor = self._start_anchor() if last.boundary_uuid is not None else None
        self._last = _Last(leaf, s.last_row_line if s.row_count else last.line, s.row_count, converter,
                           last.start_line, requests, anchor, last.boundary_uuid, last.missing,
                           last.post_tokens, last.awaited,
                           None if last.reorder is None else (last.reorder[0] and not collected, last.reorder[1]))
        return converter.first_changed

    def _requests_for(self, converter: Converter, start_line: int) -> list[Request]:
        """Every reply's `Request` against a rebuilt context (`_build`). The previous list's
        request is kept when it would be made the same: its reply not touched since, the same
        message index, and its time known for good (`_request_time` reached a prompt row or the
        root); so a rebuild after a compaction makes only the requests since the last one."""
        s = self._s
        previous = self._last.requests if self._last is not None else []
        reply_at = converter.reply_at
        out: list[Request] = []
        kept = 0
        if self._last is not None and start_line >= self._last.start_line:
            # replies before the previous context's start: no message index then or now
            before = self._last.start_line
            kept = min(len(previous), len(s.reply_order))
            while kept and s.replies[s.reply_order[kept - 1]].line_no >= before:
                kept -= 1
            out = previous[:kept]
            for key in s.touched | self._open_times:
                index = s.reply_index.get(key)
                if index is not None and index < kept:
                    out[index] = self._request(index, key, reply_at, start_line)
        touched, open_times, replies = s.touched, self._open_times, s.replies
        for index in range(kept, len(s.reply_order)):
            key = s.reply_order[index]
            reply = replies[key]
            if index < len(previous) and key not in touched and key not in open_times:
                p = previous[index]
                if p.entry_id == reply.first_uuid and p.message_index == (
                        None if reply.line_no < start_line else reply_at.get(key)):
                    out.append(p)
                    continue
            out.append(self._request(index, key, reply_at, start_line))
        return out

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
        """Rows from the context start to the leaf, the last compact_boundary on it, missing
        parents. (`self._linear`: False when a compaction's preserved rows were inserted, so the
        rows are not in parent order and a rewind cannot go back along them.)"""
        self._linear = True
        self._reorder: tuple[bool, Any] | None = None
        self._awaited: set[str] = set()
        s = self._s
        leaf = self._leaf()
        chain: list[dict[str, Any]] = []
        seen: set[str] = set()
        missing = 0
        uuid = leaf
        while isinstance(uuid, str) and uuid not in seen:
            row = self._row_of(uuid)
            if row is None:
                missing += 1
                self._awaited.add(uuid)
                break
            seen.add(uuid)
            chain.append(row)
            if row.get("type") == "system" and row.get("subtype") == "compact_boundary":
                break
            uuid = row.get("parentUuid")
        if isinstance(uuid, str) and uuid in seen:
            self._linear = False  # (a cycle of parents: another leaf on it would start elsewhere)
        chain.reverse()
        boundary = chain[0] if chain and chain[0].get("subtype") == "compact_boundary" else None
        if boundary is not None:
            meta = boundary.get("compactMetadata") if isinstance(boundary.get("compactMetadata"), dict) else {}
            kept = meta.get("preservedMessages") if isinstance(meta.get("preservedMessages"), dict) else {}
            uuids = kept.get("uuids") if isinstance(kept.get("uuids"), list) else ()
            preserved = [self._row_of(u) for u in uuids if isinstance(u, str) and u in s.recs]
            self._awaited.update(u for u in uuids if isinstance(u, str) and u not in s.recs)
            rest = chain[1:]
            anchor = kept.get("anchorUuid")
            found = next((i + 1 for i, r in enumerate(rest) if r.get("uuid") == anchor), None)
            at = found if found is not None else 1 if rest and rest[0].get("isCompactSummary") else 0
            chain = [boundary, *rest[:at], *(r for r in preserved if r is not None), *rest[at:]]
            if any(r is not None for r in preserved):
                self._linear = False
                # where the preserved rows go may move with later rows: with nothing after the
                # boundary yet, or an anchor not read yet (`_extend` then rebuilds)
                self._reorder = (not rest, anchor if found is None else None)
        return chain, boundary, missing

    def _build(self) -> None:
        """Convert the whole chain from the leaf (back to the last compaction on it) afresh."""
        s = self._s
        chain, boundary, missing = self._chain()
        cleared_tools: set[str] = set()
        cleared_attachments: set[str] = set()
        micro: list[Compaction] = []
        for row in chain:
            if row.get("type") == "system" and row.get("subtype") == "microcompact_boundary":
                meta = row.get("microcompactMetadata") if isinstance(row.get("microcompactMetadata"), dict) else {}
                cleared_tools |= {t for t in listed(meta.get("compactedToolIds")) if isinstance(t, str)}
                cleared_attachments |= {t for t in listed(meta.get("clearedAttachmentUUIDs")) if isinstance(t, str)}
                micro.append(Compaction(row.get("uuid"), iso_seconds(row.get("timestamp")), "micro",
                                        meta.get("preTokens") if isinstance(meta.get("preTokens"), int) else None))
        converter = Converter(cleared_tools, cleared_attachments, s.replies)
        converter.linear = self._linear
        for row in chain:
            converter.add(row)
        boundary_uuid = boundary.get("uuid") if boundary else None
        start_line = s.recs[boundary_uuid][REC_LINE] if isinstance(boundary_uuid, str) and boundary_uuid in s.recs else 0
        requests = self._requests_for(converter, start_line)
        start_anchor = self._start_anchor() if boundary is not None else None
        post_tokens = mapped(mapped(boundary).get("compactMetadata")).get("postTokens") if boundary else None
        self._cached_micro = micro
        # (the leaf the chain was walked from: with preserved rows inserted, the last row of the
        # context is not the one later rows extend)
        self._last = _Last(self._leaf() if chain else None, s.last_row_line if s.row_count else 0,
                           s.row_count, converter, start_line, requests, start_anchor, boundary_uuid, missing,
                           post_tokens, frozenset(self._awaited), self._reorder)

    def _conversation(self, converter: Converter, requests: list[Request], leaf: str | None, *,
                      stable: int) -> Conversation:
        """The frozen `Conversation` of the converted messages, the requests and the state."""
        s = self._s
        last = self._last
        assert last is not None
        diagnostics: list[Any] = list(s.diagnostics)
        if last.missing:
            diagnostics.append(Diagnostic(Problem.MISSING_PARENT, "the chain from the leaf names a parent uuid that is not in the file; the context starts there"))
        boundary_uuid, start_anchor = last.boundary_uuid, last.start_anchor
        if s.duplicates:
            diagnostics.append(Diagnostic(Problem.DUPLICATE_ID, f"{s.duplicates} rows repeated an earlier uuid (counted once, the first kept)"))
        # every compaction of the file (the chain only reaches the last one)
        all_compactions = s.compactions
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
            "postTokens": last.post_tokens,
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
        key = (reply.key, reply.first_uuid)
        if self._anchor is not None and self._anchor[0] == key:
            return self._anchor[1]  # (the same first request: the rows before it do not change)
        chain: list[dict[str, Any]] = []
        seen: set[str] = set()
        first = s.recs.get(reply.first_uuid) if isinstance(reply.first_uuid, str) else None
        uuid = first[REC_PARENT] if first is not None else None
        while isinstance(uuid, str) and uuid not in seen and uuid in s.recs:
            seen.add(uuid)
            row = self._row_of(uuid)
            if row is None:
                break
            chain.append(row)
            uuid = row.get("parentUuid")
        chain.reverse()
        messages, _, _ = convert(chain, set(), set(), s.replies)
        anchor = {"entryId": reply.first_uuid, "promptTokens": reply.usage.prompt_tokens,
                  "messageTokens": messages_tokens_of(messages)}
        if not isinstance(uuid, str):  # (the walk reached the root: a parent read later cannot change it)
            self._anchor = (key, anchor)
        return anchor

    def _request_time(self, reply: _Reply) -> float | None:
        """When the request was sent: the prompt / tool-result row the reply answers (walk up the
        parents past the reply's own streamed rows), else the reply's time (format doc §3)."""
        recs = self._s.recs
        rec = recs.get(reply.first_uuid) if isinstance(reply.first_uuid, str) else None
        self._open_times.discard(reply.key)
        if rec is None:
            return reply.timestamp
        for _ in range(64):
            parent = recs.get(rec[REC_PARENT]) if rec[REC_PARENT] is not None else None
            if parent is None:
                if rec[REC_PARENT] is not None:
                    self._open_times.add(reply.key)  # (its parent may come later in the file)
                break
            if not parent[REC_ASSISTANT]:
                t = iso_seconds(parent[REC_TIME])
                return t if t is not None else reply.timestamp
            rec = parent
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
        lines = [x for x in listed(att.get("addedLines")) if isinstance(x, str)]
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
        files = [f for f in listed(att.get("files")) if isinstance(f, Mapping)]
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
        added = {t for t in listed(att.get("addedTypes")) if isinstance(t, str)}
        return "custom_agents" if added - BUILTIN_AGENTS else "attachments"
    return ATTACHMENT_CATEGORY.get(kind, "attachments")


class Converter:
    """Rows of the context chain → Pi-shaped messages, their `MessageMeta`, and reply key → index
    of its message (see `convert`), one row at a time (`add`), so a live reader converts only the
    rows an append brought. A message is never changed once made: an assistant row that joins
    the last message (the same `message.id`) replaces it with a new dict; `first_changed` is the
    lowest index replaced or added since it was last reset (`mark`).

    Each row added is journaled (`rewind`): a chain that leaves the previous leaf for another
    branch from an earlier row of this context (Claude Code's retry after an API error, a
    rewind) goes back to that row and converts only the new rows (issue 36: no rebuild, which
    would read the context's rows again). `changed_keys`: the reply keys whose message index
    was set or dropped since `mark`."""

    def __init__(self, cleared_tools: set[str], cleared_attachments: set[str], replies: Mapping[str, _Reply]) -> None:
        self.cleared_tools, self.cleared_attachments, self.replies = cleared_tools, cleared_attachments, replies
        self.messages: list[dict[str, Any]] = []
        self.metas: list[MessageMeta] = []
        self.reply_at: dict[str, int] = {}
        self.tool_names: dict[str, str] = {}
        self.current_key: str | None = None
        self.first_changed = 0
        self.changed_keys: set[str] = set()
        self.linear = True  # rows added in parent order (False: a compaction's preserved rows inserted)
        # per row added: (messages after it, the last message then, current_key, tool log length,
        # key log length); the logs undo `tool_names` and `reply_at` entries
        self._journal: list[tuple[int, Any, Any, int, int]] = []
        self._at: dict[str, int] = {}  # row uuid → its journal position
        self._uuids: list[Any] = []
        self._tool_log: list[tuple[str, str | None]] = []
        self._key_log: list[str] = []
        self._texts: dict[str, str] = {}  # long texts, one object each (`_share`)

    def _share(self, text: Any) -> Any:
        """`text` itself, or an equal long text this context already holds (sessions repeat
        skill and agent listings, file reads, tool outputs: one copy in memory, issue 36)."""
        if type(text) is str and len(text) >= SHARED_TEXT_CHARS:
            return self._texts.setdefault(text, text)
        return text

    def _shared_blocks(self, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for block in blocks:  # (`_text_blocks` made these dicts: changed before anyone sees them)
            if "text" in block:
                block["text"] = self._share(block["text"])
        return blocks

    def mark(self) -> None:
        """Start counting changes afresh (`first_changed` = the current length)."""
        self.first_changed = len(self.messages)
        self.changed_keys = set()

    def has(self, uuid: Any) -> bool:
        """True when row `uuid` was converted into this context (and not rewound)."""
        return isinstance(uuid, str) and uuid in self._at

    def rewind(self, uuid: str) -> None:
        """Go back to the state right after row `uuid` was added (`has(uuid)`): later rows'
        messages, tool names and reply indexes are dropped; the last message is the one made
        then (a message is never changed in place: the object is restored)."""
        p = self._at[uuid]
        count, last, key, tools, keys = self._journal[p]
        messages = self.messages
        changed = count if count == len(messages) and (not count or messages[count - 1] is last) else max(count - 1, 0)
        self.first_changed = min(self.first_changed, changed)
        del messages[count:], self.metas[count:]
        if count:
            messages[count - 1] = last
        self.current_key = key
        for tool_id, previous in reversed(self._tool_log[tools:]):
            if previous is None:
                self.tool_names.pop(tool_id, None)
            else:
                self.tool_names[tool_id] = previous
        del self._tool_log[tools:]
        for k in self._key_log[keys:]:
            self.reply_at.pop(k, None)
            self.changed_keys.add(k)
        del self._key_log[keys:]
        for u in self._uuids[p + 1:]:
            self._at.pop(u, None)
        del self._uuids[p + 1:], self._journal[p + 1:]

    def _append(self, message: dict[str, Any], meta: MessageMeta) -> None:
        self.messages.append(message)
        self.metas.append(meta)

    def add(self, row: Mapping[str, Any]) -> None:
        """Convert one row of the chain (rows in chain order)."""
        self._add(row)
        uuid = row.get("uuid")
        if isinstance(uuid, str) and uuid not in self._at:
            self._at[uuid] = len(self._journal)
            self._uuids.append(uuid)
            messages = self.messages
            self._journal.append((len(messages), messages[-1] if messages else None, self.current_key,
                                  len(self._tool_log), len(self._key_log)))

    def _add(self, row: Mapping[str, Any]) -> None:
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
                    blocks.append({"type": "text", "text": self._share(block["text"])})
                elif btype == "thinking":
                    blocks.append({"type": "thinking", "thinking": self._share(str(block.get("thinking", "")))})
                elif btype == "redacted_thinking":
                    blocks.append({"type": "thinking", "thinking": str(block.get("data", "")), "redacted": True})
                elif btype == "tool_use":
                    tool_id, name = str(block.get("id", "")), str(block.get("name", "?"))
                    self._tool_log.append((tool_id, self.tool_names.get(tool_id)))
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
                self._key_log.append(key)
                self.changed_keys.add(key)
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
                    body = [{"type": "text", "text": CLEARED_TOOL_RESULT}] if cleared else self._shared_blocks(_text_blocks(block.get("content")))
                    result = row.get("toolUseResult") if isinstance(row.get("toolUseResult"), dict) else {}
                    source = f"subagent:{result['agentId']}" if isinstance(result.get("agentId"), str) else None
                    if cleared:
                        source = "microcompact:cleared"
                    self._append({"role": "toolResult", "toolCallId": tool_id, "toolName": name, "content": body,
                                  "isError": block.get("is_error") is True, "timestamp": row.get("timestamp")},
                                 MessageMeta(uuid, tool=name, source=source))
                else:
                    texts.extend(self._shared_blocks(_text_blocks([block] if isinstance(block, dict) else block)))
            if texts:
                self._append({"role": "user", "content": texts, "timestamp": row.get("timestamp")},
                             MessageMeta(uuid, source="isMeta" if row.get("isMeta") else None))
            return
        if kind == "system" and row.get("subtype") == LOCAL_COMMAND and isinstance(row.get("content"), str):
            if row["content"]:
                self._append({"role": "user", "content": [{"type": "text", "text": self._share(row["content"])}],
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
            self._append({"role": "user", "content": [{"type": "text", "text": self._share(text)}], "timestamp": row.get("timestamp")},
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
