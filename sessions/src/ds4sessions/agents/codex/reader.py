"""Incremental reader of one Codex rollout (`rollout-*.jsonl`) into the neutral `Conversation`.

Line shape `{timestamp, type, payload}` (codex-rs/protocol/src/protocol.rs `RolloutLine`,
`RolloutItem`: `session_meta`, `response_item`, `compacted`, `turn_context`, `event_msg`; 0.171
also writes `token_usage_record` and `world_state`; shared/docs/codex-format.md §2).

What it builds (rules from codex-format.md, checked in codex-rs):

- **Messages** (Pi-shaped, see `ds4sessions.agents.base`): `session_meta.base_instructions.text`
  (older: `instructions`) is the system prompt; `response_item`s in file order: user text →
  `user`; developer and harness messages (skills, permissions, environment context, subagent
  notifications) → `custom` with `customType` = the recorded content kind; assistant text →
  `assistant`; `reasoning` → an assistant `thinking` block with the summary (encrypted content
  is opaque: counted in bytes, flagged in `MessageMeta.opaque`); `function_call`,
  `custom_tool_call`, `local_shell_call`, `web_search_call` → `toolCall` blocks; their outputs →
  `toolResult` with the tool name. Items with `metadata.compaction_output` (the summary written
  before `compacted`) are not added twice. Tool definitions: `session_meta.dynamic_tools` (client-injected
  `DynamicToolSpec`s, protocol.rs `SessionMeta`) are recorded and become the system message's
  `toolsAdded`; Codex's built-in tools are not in the rollout: without `dynamic_tools` the system
  message gets the definitions Codex `cli_version` sent in the agent-oracle's run
  (`ds4core.agent_models.codex_tools`, a subagent's set for a subagent thread), labelled in
  `extra["toolsSource"]`; `extra["toolsInferred"]` lists the tool names called.
- **Compaction**: a `compacted` row replaces the context by its `replacement_history`
  (codex-rs core `compact.rs`: the history is rebuilt from it); without one (older Codex), the
  earlier user messages plus the summary. A `compaction` / `compaction_summary` item holds a
  remote compaction's encrypted summary: opaque, labelled.
- **Requests**: one per `event_msg/token_count` with `info` that is not a re-emit (same
  `total_token_usage` and `last_token_usage` as the previous row), not part of a fork's replayed
  parent segment (rows after a `session_meta` of another thread until this thread's own
  `session_meta` comes back; ccusage #1349/#1369, cc-switch #5435), and not the post-compaction
  placeholder (input = output = 0, total > 0; codex-format.md MAIN:73). Its usage is the delta
  of `total_token_usage`, or `last_token_usage` when the total went back (a reset) or the
  baseline is unknown (a fork's first row carries the parent's cumulative total). The
  compaction call itself (its `response_id` = `compacted.compaction_response_id`) is a real,
  billed request but never the context anchor.
- **Context now**: `last_token_usage.total_tokens` of the last real request
  (protocol.rs `tokens_in_context_window`); unknown right after a compaction until the next real
  request (Codex's own placeholder total is kept as an estimate).
- `info: null` rows carry only rate limits (protocol.rs `TokenCountEvent`, `RateLimitSnapshot`);
  the latest snapshot is kept in `extra["rateLimits"]`.

`feed()` never raises for file content: every problem is a counted `CodexDiagnostic`; every
row type and event type is counted in `extra["rowTypes"]` / `extra["eventTypes"]`, so unknown
ones stay visible.
"""

from __future__ import annotations

import io
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ds4core.spare import Spares
from ds4core.agent_models import codex_tools, tools_table
from ds4sessions.agents.common import iso_seconds as _seconds
from ds4sessions.agents.base import LineDiagnostic, CODEX, listed, mapped, Capabilities, Compaction, Conversation, MessageMeta, Request
from ds4sessions.agents.codex.tokens import RawUsage, auto_compact, percent_left, window_note
from ds4sessions.ingest import limits
from ds4sessions.ingest.limits import OversizedLine
from ds4sessions.ingest.limits import iter_lines as file_lines

CAPABILITIES = Capabilities(
    ds4_plan=True,  # a what-if: "what DS4 would send" (ds4_exact False)
    retrieval=False,  # DS4 retrieves entries outside the context: the reader keeps the context only
    steering=False,
    bridge=False,
    cache_ttl_recorded=False,
    read_only_reason="Codex rollouts are Codex's own append-only record; ds4tui only reads them "
    "(only Pi sessions can be steered)",
)
"""What ds4tui offers for Codex sessions: read-only, no DS4 planning, no recorded cache TTL."""

KNOWN_ROW_TYPES = frozenset({"session_meta", "response_item", "compacted", "turn_context", "event_msg",
                             "token_usage_record", "world_state"})
"""Row types this reader understands (protocol.rs `RolloutItem`, plus 0.171's two)."""

KNOWN_ITEM_TYPES = frozenset({"message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
                              "custom_tool_call_output", "local_shell_call", "web_search_call", "compaction",
                              "compaction_summary", "ghost_snapshot", "tool_search_call", "tool_search_output",
                              "image_generation_call"})
"""`response_item` payload types this reader understands (codex-rs/protocol/src/models.rs `ResponseItem`)."""

CONTROL_TEXT = 80
"""Characters of a bad line quoted in a diagnostic; also the title length."""


CodexDiagnostic = LineDiagnostic
"""(`agents.base.LineDiagnostic`: the neutral counted problem of a line-based reader.)"""


SPAWN_LOOKUP_SECONDS = 10.0
"""Seconds between two searches of the parent's rollout for a subagent's spawn call."""

MAX_KEPT_DIAGNOSTICS = 200
"""Diagnostics kept for display (all are counted in `extra["diagnosticCounts"]`)."""


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


try:
    from orjson import loads as _ORJSON
except ImportError:  # pragma: no cover - orjson is a dependency; the stdlib is the fallback
    _ORJSON = json.loads


def _content_text(content: Any) -> list[dict[str, Any]]:
    """Responses API content items → Pi content blocks (text; images as Pi image blocks when
    they are data URLs, else a text placeholder)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for item in content if isinstance(content, list) else ():
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if isinstance(item.get("text"), str):
            blocks.append({"type": "text", "text": item["text"]})
        elif kind == "input_image":
            url = item.get("image_url")
            if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
                mime, _, data = url[5:].partition(";base64,")
                blocks.append({"type": "image", "data": data, "mimeType": mime})
            else:
                blocks.append({"type": "text", "text": "[image]"})
    return blocks


def _output_blocks(output: Any) -> list[dict[str, Any]]:
    """A tool output (string, `{content, success}` object or a list of content items) → blocks."""
    if isinstance(output, str):
        return [{"type": "text", "text": output}]
    if isinstance(output, Mapping):
        inner = output.get("content")
        if isinstance(inner, (str, list)):
            return _content_text(inner)
        return [{"type": "text", "text": json.dumps(output, ensure_ascii=False)}]
    if isinstance(output, list):
        return _content_text(output)
    return [{"type": "text", "text": "" if output is None else json.dumps(output)}]


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return {"raw": raw}
    return raw if raw is not None else {}


class CodexReader:
    """Incremental reader of one rollout (one instance per file, driven by one thread).

    `feed(lines)` takes complete lines `(line_no, byte_offset, raw_bytes)`; `conversation()`
    returns the frozen `Conversation` after everything fed. `context_window` overrides the
    recorded `model_context_window` (tokens); `configured_window` is the full window configured
    in `config.toml` or a model catalog (tokens), used for the 95 % note and the auto-compaction
    limit with `auto_compact_limit` (`model_auto_compact_token_limit`, tokens); `find_thread`
    maps a thread id to its rollout (a fork's parent, a subagent's parent). Memory is
    O(messages kept + requests); message bodies of compacted history are dropped.
    """

    def __init__(self, path: Path, *, context_window: int | None = None, configured_window: int | None = None,
                 find_thread: Callable[[str], Path | None] | None = None, auto_compact_limit: int | None = None) -> None:
        self.path = Path(path)
        self.find_thread = find_thread
        self.auto_compact_setting = auto_compact_limit
        self.inherited: dict[str, Any] | None = None
        self.tools_recorded: list[str] = []
        self.tools_source: str | None = None
        self._spawn_call_id: str | None = None
        self._spawn_lookup = float("-inf")
        self.window_override = context_window
        self.configured_window = configured_window
        self.entries = 0
        self._diags: list[CodexDiagnostic] = []
        self._diag_counts: Counter[str] = Counter()
        self.row_types: Counter[str] = Counter()
        self.event_types: Counter[str] = Counter()
        self.item_types: Counter[str] = Counter()
        # session facts
        self.meta: dict[str, Any] | None = None
        self.thread_id: str | None = None
        self.system_text: str | None = None
        self.title: str | None = None
        self.cwd: str | None = None
        self.provider: str | None = None
        self.model: str | None = None
        self.effort: str | None = None
        self.turns: list[dict[str, Any]] = []
        self.recorded_window: int | None = None
        self.rate_limits: dict[str, Any] | None = None
        self.rate_limit_rows = 0
        self.live_turn: str | None = None
        self.last_time: float | None = None
        # messages of the current context
        self._messages: list[dict[str, Any]] = []
        self._changed_from = 0  # the lowest message index changed since the last `conversation()`
        self._meta: list[MessageMeta] = []
        self._tool_names: dict[str, str] = {}
        self.tools_seen: Counter[str] = Counter()
        self.spawned: list[dict[str, Any]] = []
        self.opaque_bytes = 0
        self.opaque_items = 0
        self._turn_starts: list[int] = []
        self._last_input_index = 0
        # tokens
        self._requests: list[Request] = []
        self._indexed_from = 0  # requests before this one have no message index (a compaction cleared them)
        self._req_src: list[Request] = []  # what `_frozen_requests` converted last time, and into what
        self._req_out: list[Request] = []
        self._req_calls: set[int] = set()
        self._turn_copies: list[dict[str, Any]] = []
        self._req_changes = 0  # bumped when earlier requests change (a compaction clears their indexes)
        self._req_seen = -1  # `_req_changes` when `_frozen_requests` last ran
        self._req_handed: list[Request] | None = None  # the requests list the last conversation holds
        self._turns_handed: list[dict[str, Any]] | None = None  # its turns list
        # the lists the last conversation holds (never changed once handed out), and copies of
        # them made ahead of the next append (`prepare`)
        self._handed: tuple[list[Any], list[Any]] | None = None
        self._spares = Spares()
        self._request_context: list[int] = []
        self._compaction_calls: set[int] = set()
        self._prev_total: RawUsage | None = None
        self._prev_last: RawUsage | None = None
        self._pending_response: tuple[str, int] | None = None
        self._after_compaction = False
        self.codex_estimate: int | None = None
        self.compactions: list[Compaction] = []
        self._foreign: str | None = None
        self.replayed_rows = 0
        self._items_since_request = 0
        self._first_request_seen = False
        self.leaf_id: str | None = None

    # ---------------------------------------------------------------- diagnostics

    def _diag(self, kind: str, message: str, line_no: int | None = None, offset: int | None = None,
              raw: bytes | str | None = None) -> None:
        self._diag_counts[kind] += 1
        if len(self._diags) < MAX_KEPT_DIAGNOSTICS:
            excerpt = None
            if raw is not None:
                text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
                excerpt = text[:CONTROL_TEXT]
            self._diags.append(CodexDiagnostic(kind, message, line_no, offset, excerpt))

    @property
    def diagnostics(self) -> tuple[CodexDiagnostic, ...]:
        """The kept diagnostics, in file order."""
        return tuple(self._diags)

    @property
    def diagnostic_counts(self) -> dict[str, int]:
        """Every diagnostic counted by kind."""
        return dict(self._diag_counts)

    # ---------------------------------------------------------------- feeding

    def feed(self, lines: Sequence[tuple[int, int, bytes]]) -> None:
        """Read complete lines; never raises for their content."""
        for line_no, offset, raw in lines:
            self._line(line_no, offset, raw)

    def _line(self, line_no: int, offset: int, raw: bytes) -> None:
        if isinstance(raw, OversizedLine):  # (a line over the read's cap: only its head was kept)
            self._diag("oversized", f"line of {raw.length:,} bytes is longer than the {limits.MAX_LINE_BYTES:,}-byte cap; "
                       "not read", line_no, offset)
            return
        stripped = raw.strip()
        if not stripped:
            return
        if stripped.startswith(b"\xef\xbb\xbf"):
            self._diag("bom", "UTF-8 byte order mark", line_no, offset)
            stripped = stripped[3:]
        row = None
        if stripped[:1] == b"{":
            try:
                row = _ORJSON(stripped)  # (one parse in C; what orjson refuses, the stdlib decides)
            except Exception:
                row = None
        if row is None:
            try:
                row = json.loads(stripped)
            except (ValueError, RecursionError):
                self._diag("malformed", "not valid JSON", line_no, offset, stripped)
                return
        if not isinstance(row, dict):
            self._diag("non_object", "not a JSON object", line_no, offset, stripped)
            return
        self.entries += 1
        kind = row.get("type")
        if not isinstance(kind, str):
            if self.entries == 1 and isinstance(row.get("id"), str):
                # pre-2025-09 rollouts start with a bare `{id, timestamp, instructions}` meta line
                self._session_meta(row, line_no)
                self.row_types["legacy_meta"] += 1
                return
            self._diag("no_type", "row without a string `type`", line_no, offset, stripped)
            return
        self.row_types[kind] += 1
        when = _seconds(row.get("timestamp"))
        if when is not None:
            self.last_time = when
        payload = row.get("payload")
        try:
            if kind == "session_meta":
                self._session_meta(mapped(payload), line_no)
            elif kind == "turn_context":
                self._turn_context(mapped(payload), when)
            elif kind == "response_item":
                self._response_item(mapped(payload), row, line_no, offset, when)
            elif kind == "compacted":
                self._compacted(mapped(payload), when, line_no)
            elif kind == "event_msg":
                self._event(mapped(payload), when, line_no, offset)
            elif kind == "token_usage_record":
                p = mapped(payload)
                rid = _str(p.get("response_id"))
                if rid is not None:
                    self._pending_response = (rid, self._reply_start())
            elif kind == "world_state":
                pass
            else:
                self._diag("unknown_row_type", f"unknown row type {kind!r} (kept, ignored)", line_no, offset, stripped)
        except Exception as error:  # noqa: BLE001 - a bad row must never stop the reader
            self._diag("unreadable_row", f"{kind} row not understood ({type(error).__name__})", line_no, offset, stripped)

    # ---------------------------------------------------------------- rows

    def _session_meta(self, p: Mapping[str, Any], line_no: int) -> None:
        own = _str(p.get("id"))
        if self.meta is None:
            self.meta = dict(p)
            self.thread_id = own
            self.cwd = _str(p.get("cwd"))
            self.provider = _str(p.get("model_provider"))
            base = p.get("base_instructions")
            self.system_text = _str(mapped(base).get("text")) if isinstance(base, Mapping) else _str(base)
            if self.system_text is None:
                self.system_text = _str(p.get("instructions"))
            tools = [
                {"name": ".".join(x for x in (_str(t.get("namespace")), _str(t.get("name"))) if x) or "?",
                 "description": t.get("description"), "parameters": t.get("input_schema")}
                for t in p.get("dynamic_tools") or () if isinstance(t, Mapping)
            ] if isinstance(p.get("dynamic_tools"), list) else []
            self.tools_recorded = [t["name"] for t in tools]
            if not tools:
                # the rollout records no built-in tool definition: Codex's own, as sent by this
                # version (data/agent-tools.json, from the agent-oracle's request log), labelled
                subagent = p.get("thread_source") == "subagent" or isinstance(mapped(p.get("source")).get("subagent"), Mapping)
                known, measured = codex_tools(_str(p.get("cli_version")), subagent=subagent)
                if known:
                    tools = [dict(t, name=str(t.get("name") or t.get("type") or "?")) for t in known]
                    self.tools_source = (f"Codex {measured}'s tool definitions as sent to "
                                         f"{tools_table()['codex'][measured].get('model')} (data/agent-tools.json; "
                                         "the rollout records none): inferred")
            if self.system_text or tools:
                system: dict[str, Any] = {"role": "system", "content": self.system_text or ""}
                if tools:
                    system["toolsAdded"] = tools
                self._messages.insert(0, system)
                self._changed_from = 0
                self._meta.insert(0, MessageMeta(entry_id=own, source="session_meta.base_instructions"))
                self._last_input_index = len(self._messages)
            self._inherit(p)
            return
        if own is not None and own == self.thread_id:
            if self._foreign is not None:
                self._foreign = None
            return
        # another thread's meta inside this file: a fork's replayed parent segment
        self._foreign = own or "?"
        self.row_types["replayed_session_meta"] += 1

    def _inherit(self, p: Mapping[str, Any]) -> None:
        """A 0.171 fork (`forked_from_id` + `forked_from_ordinal_exclusive`) starts from the parent's
        rows before that ordinal, which stay in the parent's file (paginated history). Read them
        as a replayed segment: their messages are the fork's context, their token rows are the
        parent's (not counted again; they set the cumulative baseline)."""
        parent, upto = _str(p.get("forked_from_id")), p.get("forked_from_ordinal_exclusive")
        if parent is None or not isinstance(upto, int) or self.find_thread is None:
            return
        path = self.find_thread(parent)
        self.inherited = {"parent": parent, "ordinalExclusive": upto, "path": str(path) if path else None, "rows": 0}
        if path is None:
            self._diag("fork_parent_missing", f"forked from {parent}, whose rollout was not found: inherited history unknown")
            return
        self._foreign = parent
        try:
            with open(path, "rb") as f:  # (streamed, and only up to the fork's ordinal)
                for line_no, offset, raw, _ in file_lines(f):
                    try:
                        ordinal = json.loads(raw).get("ordinal")
                    except (ValueError, AttributeError):
                        continue
                    if not isinstance(ordinal, int) or ordinal >= upto:
                        break
                    self.inherited["rows"] += 1
                    self._line_inherited(line_no, offset, raw)
        except OSError as error:
            self._diag("fork_parent_missing", f"parent rollout {path} unreadable: {error}")
        finally:
            self._foreign = None

    def _line_inherited(self, line_no: int, offset: int, raw: bytes) -> None:
        row = json.loads(raw)
        if not isinstance(row, dict) or row.get("type") == "session_meta":
            return
        saved = self.entries, Counter(self.row_types), Counter(self.event_types), Counter(self.item_types), self.title
        self._line(line_no, offset, raw)
        # the parent's rows are not this file's entries, nor its title
        self.entries, self.row_types, self.event_types, self.item_types, self.title = saved
        self.row_types["inherited"] += 1

    def _turn_context(self, p: Mapping[str, Any], when: float | None) -> None:
        model = _str(p.get("model"))
        effort = _str(p.get("effort"))
        settings = mapped(mapped(p.get("collaboration_mode")).get("settings"))
        if effort is None:
            effort = _str(settings.get("reasoning_effort"))
        if model:
            self.model = model
        self.effort = effort
        if self._foreign is None:
            turn = _str(p.get("turn_id"))
            if not self.turns or self.turns[-1].get("turnId") != turn or turn is None:
                self.turns.append({"turnId": turn, "model": model, "effort": effort, "time": when})
            else:
                self.turns[-1].update(model=model, effort=effort)

    def _reply_start(self) -> int:
        """Index of the first message of the reply being recorded (after the last input-side message)."""
        return self._last_input_index

    def _add(self, message: dict[str, Any], meta: MessageMeta, *, input_side: bool) -> None:
        self._messages.append(message)
        self._meta.append(meta)
        if input_side:
            self._last_input_index = len(self._messages)
        self._items_since_request += 1

    def _response_item(self, p: Mapping[str, Any], row: Mapping[str, Any], line_no: int, offset: int,
                       when: float | None) -> None:
        kind = _str(p.get("type")) or "?"
        self.item_types[kind] += 1
        item_id = _str(p.get("id")) or _str(p.get("call_id")) or f"line:{line_no}"
        self.leaf_id = item_id
        metadata = mapped(row.get("metadata")) or mapped(p.get("metadata"))
        if metadata.get("compaction_output") is True:
            return  # the summary, already part of the `compacted` row that follows
        if kind not in KNOWN_ITEM_TYPES:
            self._diag("unknown_item_type", f"unknown response_item type {kind!r} (kept, ignored)", line_no, offset,
                       json.dumps(p)[:CONTROL_TEXT])
            return
        ms = int(when * 1000) if when is not None else None
        self._item(p, kind, item_id, ms)

    def _item(self, p: Mapping[str, Any], kind: str, item_id: str, ms: int | None) -> None:
        if kind == "message":
            role = _str(p.get("role")) or "user"
            blocks = _content_text(p.get("content"))
            kinds = mapped(p.get("internal_chat_message_metadata_passthrough")).get("content_item_kinds")
            first_kind = kinds[0] if isinstance(kinds, list) and kinds and isinstance(kinds[0], str) else None
            if role == "assistant":
                self._add({"role": "assistant", "content": blocks, "timestamp": ms},
                          MessageMeta(entry_id=item_id, source="message.assistant"), input_side=False)
                return
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            if role == "user" and first_kind in (None, "user.text") and not text.startswith(("<environment_context>", "<user_instructions>", "<subagent_notification>")):
                self._turn_starts.append(len(self._messages))
                if self.title is None and text.strip():
                    self.title = " ".join(text.split())[:CONTROL_TEXT]
                self._add({"role": "user", "content": blocks, "timestamp": ms},
                          MessageMeta(entry_id=item_id, source="message.user"), input_side=True)
                return
            custom = first_kind or ("developer" if role == "developer" else "harness")
            category = "compaction" if custom == "compaction.summary" else None
            message = {"role": "custom", "customType": custom, "content": blocks, "display": False, "timestamp": ms}
            if category:
                message["ds4Category"] = category
            self._add(message, MessageMeta(entry_id=item_id, category=category, source=f"message.{role}"), input_side=True)
            return
        if kind == "reasoning":
            summary = "\n\n".join(
                s.get("text", "") for s in listed(p.get("summary")) if isinstance(s, Mapping) and isinstance(s.get("text"), str)
            )
            raw = p.get("content")
            if isinstance(raw, list):  # raw reasoning text, when the provider returns it
                summary = summary or "\n\n".join(c.get("text", "") for c in raw if isinstance(c, Mapping) and isinstance(c.get("text"), str))
            enc = p.get("encrypted_content")
            size = len(enc) * 3 // 4 if isinstance(enc, str) else 0
            if size:
                self.opaque_bytes += size
                self.opaque_items += 1
            block = {"type": "thinking", "thinking": summary}
            if size:
                block["opaqueBytes"] = size
            self._add({"role": "assistant", "content": [block], "timestamp": ms},
                      MessageMeta(entry_id=item_id, opaque=bool(size),
                                  source="reasoning.summary" + (f" + {size} opaque encrypted bytes" if size else "")),
                      input_side=False)
            return
        if kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call", "tool_search_call",
                    "image_generation_call"):
            name = _str(p.get("name")) or {"local_shell_call": "local_shell", "web_search_call": "web_search",
                                           "tool_search_call": "tool_search",
                                           "image_generation_call": "image_generation"}.get(kind, "?")
            namespace = _str(p.get("namespace"))
            shown = f"{namespace}.{name}" if namespace else name
            call_id = _str(p.get("call_id")) or item_id
            if kind == "function_call":
                args = _arguments(p.get("arguments"))
            elif kind == "custom_tool_call":
                args = {"input": p.get("input")}
            else:
                args = p.get("action") if p.get("action") is not None else {}
            self._tool_names[call_id] = shown
            self.tools_seen[shown] += 1
            self._add({"role": "assistant", "content": [{"type": "toolCall", "id": call_id, "name": shown, "arguments": args}],
                       "timestamp": ms}, MessageMeta(entry_id=item_id, tool=shown, source=kind), input_side=False)
            return
        if kind in ("function_call_output", "custom_tool_call_output", "tool_search_output"):
            call_id = _str(p.get("call_id")) or item_id
            name = self._tool_names.get(call_id, "?")
            blocks = _output_blocks(p.get("output"))
            if name.endswith("spawn_agent"):
                self._spawn(call_id, blocks)
            self._add({"role": "toolResult", "toolCallId": call_id, "toolName": name, "content": blocks, "isError": False,
                       "timestamp": ms}, MessageMeta(entry_id=item_id, tool=name, source=kind), input_side=True)
            return
        if kind in ("compaction", "compaction_summary"):
            enc = p.get("encrypted_content")
            size = len(enc) * 3 // 4 if isinstance(enc, str) else 0
            self.opaque_bytes += size
            self.opaque_items += 1
            self._add({"role": "custom", "customType": "compaction.remote", "display": False, "ds4Category": "compaction",
                       "content": [{"type": "text", "text": f"[remote compaction summary: {size} encrypted bytes, opaque]"}],
                       "opaqueBytes": size, "timestamp": ms},
                      MessageMeta(entry_id=item_id, category="compaction", opaque=True,
                                  source=f"{kind}.encrypted_content ({size} bytes, opaque)"), input_side=True)
            return
        # ghost_snapshot: an undo checkpoint, never sent to the model (counted in item types)

    def _spawn(self, call_id: str, blocks: list[dict[str, Any]]) -> None:
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            data = {}
        data = mapped(data)
        self.spawned.append({"callId": call_id, "agentId": _str(data.get("agent_id")) or _str(data.get("id")),
                             "nickname": _str(data.get("nickname"))})

    def _compacted(self, p: Mapping[str, Any], when: float | None, line_no: int) -> None:
        history = p.get("replacement_history")
        before = self._requests[-1] if self._requests else None
        # the compaction call: by response id (0.171), else the last request made after the last regular item
        call_index: int | None = None
        rid = _str(p.get("compaction_response_id"))
        if rid is not None:
            for i in range(len(self._requests) - 1, -1, -1):
                if self._requests[i].entry_id == rid:
                    call_index = i
                    break
        elif before is not None and self._items_since_request == 0 and self._requests:
            call_index = len(self._requests) - 1
        if call_index is not None:
            self._compaction_calls.add(call_index)
        anchor = self._anchor_index()
        tokens_before = self._request_context[anchor] if anchor is not None else None
        keep_system = self._messages[:1] if self._messages and self._messages[0].get("role") == "system" else []
        keep_meta = self._meta[: len(keep_system)]
        old_users = [(m, mm) for m, mm in zip(self._messages, self._meta) if m.get("role") == "user"]
        self._messages, self._meta = list(keep_system), list(keep_meta)
        self._changed_from = 0
        self._turn_starts = []
        self._last_input_index = len(self._messages)
        opaque = False
        if isinstance(history, list):
            for item in history:
                if isinstance(item, Mapping):
                    kind = _str(item.get("type")) or "?"
                    if kind in ("compaction", "compaction_summary"):
                        opaque = True
                    if kind in KNOWN_ITEM_TYPES:
                        self._item(item, kind, _str(item.get("id")) or f"compacted:{line_no}", None)
        else:
            for m, mm in old_users:
                self._messages.append(m)
                self._meta.append(mm)
            summary = _str(p.get("message")) or ""
            self._messages.append({"role": "custom", "customType": "compaction.summary", "display": False,
                                   "ds4Category": "compaction", "content": [{"type": "text", "text": summary}]})
            self._meta.append(MessageMeta(entry_id=f"compacted:{line_no}", category="compaction", source="compacted.message"))
        self._last_input_index = len(self._messages)
        self._items_since_request = 0
        self.compactions.append(Compaction(entry_id=rid or f"compacted:{line_no}", timestamp=when,
                                           kind="remote" if opaque else "auto", tokens_before=tokens_before, opaque=opaque))
        self._after_compaction = True
        self.codex_estimate = None
        # requests before a compaction are no longer on the current context
        self._req_changes += 1
        # (those before the previous compaction have none already: O(requests since it), not
        # O(every request) at each compaction, issue 36)
        requests = self._requests
        for i in range(self._indexed_from, len(requests)):
            if requests[i].message_index is not None:
                requests[i] = _replace_index(requests[i], None)
        self._indexed_from = len(requests)

    def _event(self, p: Mapping[str, Any], when: float | None, line_no: int, offset: int) -> None:
        kind = _str(p.get("type")) or "?"
        self.event_types[kind] += 1
        if kind == "token_count":
            self._token_count(p, when, line_no)
        elif kind == "task_started":
            self.live_turn = _str(p.get("turn_id")) or "?"
            window = p.get("model_context_window")
            if isinstance(window, int) and window > 0:
                self.recorded_window = window
        elif kind in ("task_complete", "turn_aborted"):
            self.live_turn = None
        elif kind == "thread_rolled_back":
            n = p.get("num_turns")
            if isinstance(n, int) and 0 < n <= len(self._turn_starts):
                cut = self._turn_starts[-n]
                del self._messages[cut:], self._meta[cut:], self._turn_starts[-n:]
                self._changed_from = min(self._changed_from, cut)
                self._last_input_index = min(self._last_input_index, len(self._messages))
        elif kind == "thread_name_updated" or kind == "thread_renamed":
            name = _str(p.get("thread_name")) or _str(p.get("name"))
            if name:
                self.title = name

    def _token_count(self, p: Mapping[str, Any], when: float | None, line_no: int) -> None:
        limits = p.get("rate_limits")
        if isinstance(limits, Mapping):
            self.rate_limits = {"limits": dict(limits), "time": when}
        info = p.get("info")
        if not isinstance(info, Mapping):
            self.rate_limit_rows += 1
            return
        total = RawUsage.parse(info.get("total_token_usage"))
        last = RawUsage.parse(info.get("last_token_usage"))
        window = info.get("model_context_window")
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            self.recorded_window = window
        if total is None or last is None:
            self._diag("token_count_shape", "token_count info without total/last usage", line_no)
            return
        prev_total, prev_last = self._prev_total, self._prev_last
        self._prev_total, self._prev_last = total, last
        if self._foreign is not None:
            self.replayed_rows += 1
            return
        if prev_total is not None and total == prev_total and last == prev_last:
            self.event_types["token_count.reemit"] += 1
            return
        if last.input_tokens == 0 and last.output_tokens == 0 and last.total_tokens > 0:
            # Codex's placeholder after a compaction (codex-format.md MAIN:73): an estimate, no request
            self.codex_estimate = last.total_tokens
            self.event_types["token_count.estimate"] += 1
            return
        forked_first = prev_total is None and bool(self.meta and self.meta.get("forked_from_id"))
        if prev_total is None:
            delta = total if not forked_first else last
        else:
            delta = total.minus(prev_total)
            if delta.negative or delta.is_zero:
                delta = last
        if forked_first:
            self.event_types["token_count.fork_baseline"] += 1
        rid, start = self._pending_response if self._pending_response else (None, self._reply_start())
        self._pending_response = None
        index = len(self._requests)
        self._requests.append(Request(
            index=index, usage=delta.to_usage(), entry_id=rid or f"turn:{len(self.turns)}:{index}", timestamp=when,
            model=self.model, provider=self.provider, message_index=start,
            sidechain=False,
        ))
        self._request_context.append(last.total_tokens)
        self._after_compaction = False
        self.codex_estimate = None
        self._items_since_request = 0

    def _spawn_call(self, parent: str | None) -> str | None:
        """The parent's `spawn_agent` call that made this subagent thread: the `function_call_output`
        in the parent's rollout whose `agent_id` is this thread's id (codex-format.md §4, MAIN:49).
        Looked up through `find_thread`, at most once per `SPAWN_LOOKUP_SECONDS` until found."""
        if self._spawn_call_id is not None or parent is None or self.find_thread is None or self.thread_id is None:
            return self._spawn_call_id
        now = time.monotonic()
        if now - self._spawn_lookup < SPAWN_LOOKUP_SECONDS:
            return None
        self._spawn_lookup = now
        path = self.find_thread(parent)
        try:
            data = path.read_bytes() if path is not None else b""
        except OSError:
            return None
        needle = self.thread_id.encode()
        for raw in data.splitlines():
            if needle not in raw or b"function_call_output" not in raw:
                continue
            try:
                p = mapped(json.loads(raw).get("payload"))
                output = json.loads(p.get("output")) if isinstance(p.get("output"), str) else p.get("output")
            except (ValueError, AttributeError):
                continue
            if mapped(output).get("agent_id") == self.thread_id:
                self._spawn_call_id = _str(p.get("call_id"))
                break
        return self._spawn_call_id

    # ---------------------------------------------------------------- results

    def _anchor_index(self) -> int | None:
        for i in range(len(self._requests) - 1, -1, -1):
            if i not in self._compaction_calls:
                return i
        return None

    @property
    def context_tokens(self) -> int | None:
        """Codex's own context count now (tokens): the last real request's `last_token_usage.
        total_tokens`; None right after a compaction until the next real request."""
        if self._after_compaction:
            return None
        anchor = self._anchor_index()
        return self._request_context[anchor] if anchor is not None else None

    @property
    def context_window(self) -> int | None:
        """The override when given, else the recorded `model_context_window` (tokens)."""
        return self.window_override or self.recorded_window

    def prepare(self) -> None:
        """Copy now the lists the next append extends (the last conversation's messages and
        meta: O(messages), while nothing waits; `ConversationLive.prepare`)."""
        if self._handed is not None:
            self._spares.prepare([*self._handed, self._req_handed, self._turns_handed])

    def _frozen_requests(self) -> list[Request]:
        """The requests as the conversation gives them (a compaction call's made synthetic),
        converting only those not converted last time: `_requests` only grows between two
        calls unless a compaction changed earlier ones (`_req_changes`) or marked a call. The list
        handed out is never changed; the next one is its copy (made ahead by `prepare`) plus the
        new requests: O(new)."""
        src, out = self._req_src, self._req_out
        calls = self._compaction_calls
        k = min(len(src), len(self._requests))
        if k and (self._req_changes != self._req_seen or self._req_calls != calls):
            k = 0
        del src[k:], out[k:]
        for i in range(k, len(self._requests)):
            r = self._requests[i]
            src.append(r)
            out.append(_replace_synthetic(r) if i in calls else r)
        self._req_seen = self._req_changes
        if self._req_calls != calls:
            self._req_calls = set(calls)
        handed = self._req_handed
        if handed is not None and len(handed) <= len(out) and k >= len(handed):
            handed = self._spares.copy(handed)  # (the previous conversation keeps its list)
            handed.extend(out[len(handed):])
        else:
            handed = list(out)
        self._req_handed = handed
        return handed

    def _frozen_turns(self) -> list[dict[str, Any]]:
        """Copies of the turns (the last one is updated in place by later rows: copied again),
        as a list that is never changed once handed out (the next is its copy, then the tail)."""
        copies = self._turn_copies
        if copies:
            copies.pop()
        kept = len(copies)
        copies.extend(dict(t) for t in self.turns[kept:])
        handed = self._turns_handed
        if handed is not None and len(handed) >= kept:
            handed = self._spares.copy(handed)
            del handed[kept:]
            handed.extend(copies[kept:])
        else:
            handed = list(copies)
        self._turns_handed = handed
        return handed

    def conversation(self) -> Conversation:
        """The frozen state after everything fed so far."""
        requests = self._frozen_requests()
        context = self.context_tokens
        window = self.context_window
        extra: dict[str, Any] = {
            "threadId": self.thread_id,
            "cliVersion": _str((self.meta or {}).get("cli_version")),
            "originator": _str((self.meta or {}).get("originator")),
            "effort": self.effort,
            "turns": self._frozen_turns(),
            "contextTokens": context,
            "contextState": "unknown after compaction" if self._after_compaction else ("recorded" if context is not None else "no usage yet"),
            "codexEstimate": self.codex_estimate,
            "percentLeft": percent_left(context, window) if context is not None and window else None,
            "recordedWindow": self.recorded_window,
            "windowOverride": self.window_override,
            "configuredWindow": self.configured_window,
            "windowNote": window_note(self.recorded_window, self.configured_window),
            "autoCompact": auto_compact(self.auto_compact_setting, self.configured_window),
            "compactionCalls": sorted(self._compaction_calls),
            "rateLimits": self.rate_limits,
            "rateLimitRows": self.rate_limit_rows,
            "toolsRecorded": list(self.tools_recorded),
            "toolsSource": self.tools_source or ("session_meta.dynamic_tools" if self.tools_recorded else None),
            "toolsInferred": {"names": dict(self.tools_seen),
                              "note": "Codex does not record tool definitions in the rollout; names are the tools called, "
                                      "their definitions' tokens are inside the provider's count (unattributed)"},
            "opaque": {"items": self.opaque_items, "encryptedBytes": self.opaque_bytes},
            "spawnedAgents": list(self.spawned),
            "forkReplayedTokenRows": self.replayed_rows,
            "inherited": self.inherited,
            "rowTypes": dict(self.row_types),
            "eventTypes": dict(self.event_types),
            "itemTypes": dict(self.item_types),
            "diagnosticCounts": dict(self._diag_counts),
            "live": self.live_turn is not None,
            "lastTime": self.last_time,
        }
        parent = None
        meta = self.meta or {}
        if isinstance(meta.get("forked_from_id"), str):
            parent = meta["forked_from_id"]
            extra["forkedFrom"] = parent
        spawn = mapped(mapped(mapped(meta.get("source")).get("subagent")).get("thread_spawn"))
        if spawn:
            parent = _str(spawn.get("parent_thread_id")) or _str(meta.get("parent_thread_id"))
            extra["subagent"] = {"parentThreadId": parent, "depth": spawn.get("depth"),
                                 "nickname": _str(spawn.get("agent_nickname")), "role": _str(spawn.get("agent_role")),
                                 "spawnCallId": self._spawn_call(parent)}
        elif parent is None and isinstance(meta.get("parent_thread_id"), str):
            parent = meta["parent_thread_id"]
        stable, self._changed_from = self._changed_from, len(self._messages)
        stable = min(stable, len(self._messages))
        handed = self._handed
        if handed is not None and stable > 0 and len(handed[0]) >= stable:
            # the previous lists up to `stable`, then the new tail (O(new) with `prepare`)
            messages, metas = self._spares.copy(handed[0]), self._spares.copy(handed[1])
            del messages[stable:], metas[stable:]
            messages.extend(self._messages[stable:])
            metas.extend(self._meta[stable:])
        else:
            messages, metas = list(self._messages), list(self._meta)
        self._handed = (messages, metas)
        return Conversation(
            agent=CODEX,
            path=self.path,
            capabilities=CAPABILITIES,
            stable=stable,
            messages=messages,
            meta=metas,
            requests=requests,
            compactions=tuple(self.compactions),
            session_id=self.thread_id,
            title=self.title,
            cwd=self.cwd,
            model=self.model,
            provider=self.provider,
            context_window=window,
            leaf_id=self.leaf_id,
            entries=self.entries,
            diagnostics=tuple(self._diags),
            parent=parent,
            extra=extra,
        )


def _replace_index(request: Request, index: int | None) -> Request:
    return Request(request.index, request.usage, request.entry_id, request.timestamp, request.model, request.provider,
                   index, request.sidechain, request.synthetic, request.cost_usd, request.miss_reason)


def _replace_synthetic(request: Request) -> Request:
    """The compaction call: a real, billed request, flagged `synthetic` so it never anchors the context."""
    return Request(request.index, request.usage, request.entry_id, request.timestamp, request.model, request.provider,
                   None, request.sidechain, True, request.cost_usd, request.miss_reason, billed=True)


def iter_lines(data: bytes) -> list[tuple[int, int, bytes]]:
    """Split `data` into `(line_no, offset, raw)` lines at each `\\n` only (`raw` without it), as
    Codex reads a rollout back: `str::lines` in codex-rs `RolloutRecorder::load_rollout_items`
    (core/src/rollout/recorder.rs) ends a line at `\\n` or `\\r\\n`, so a bare `\\r` is not a line
    end (`bytes.splitlines` made two lines of it); a trailing `\\r` is whitespace the reader
    strips. A torn last line is kept: at a final read the reader reports it as malformed when it
    does not parse. The lines of `ingest.limits.iter_lines` (what `read_rollout` streams, and the
    Codex view's tailer splits alike), so a line over `MAX_LINE_BYTES` is an `OversizedLine`."""
    return [(no, offset, raw) for no, offset, raw, _ in file_lines(io.BytesIO(data))]


def feed_rollout(reader: CodexReader, path: Path) -> CodexReader:
    """Feed the whole rollout file at `path` to `reader` (returned), streamed by
    `ingest.limits.iter_lines`: one read chunk in memory at a time, lines ended at `\\n` only (as
    in `iter_lines`), a line over `MAX_LINE_BYTES` reported, not read, as the Codex view's tailer
    reports it. Raises OSError when the file cannot be read."""
    line = reader._line  # (what `feed` does per line, without a second generator around the lines)
    with open(path, "rb") as f:
        for line_no, offset, raw, _ in file_lines(f):
            line(line_no, offset, raw)
    return reader


def read_rollout(path: Path, **options: Any) -> CodexReader:
    """`feed_rollout` into a new `CodexReader(path, **options)`. Raises OSError when unreadable."""
    return feed_rollout(CodexReader(path, **options), path)
