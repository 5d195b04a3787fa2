"""Incremental reader of one Gemini CLI session file into the neutral `Conversation`
(shared/docs/gemini-cli-format.md; every rule checked in the installed `@google/gemini-cli` 0.61.0,
whose sources are cited by their path in the CLI's repository).

**Replay, as the CLI's loader does** (packages/core/src/services/chatRecordingService.ts
`loadConversationRecord`; the file is append-only, one record per `appendRecord` call):

- a record with a string `$rewindTo` drops that message and every later one (in the loader's
  order); an id it does not know drops them all (the loader clears its map), with a diagnostic;
- a record with a string `id` is a message, upserted by id: a new id goes last, a known id is
  replaced in place (a JavaScript `Map.set`: the last copy wins, the first position stays). The
  CLI appends a message again each time it changes (`pushMessage`: the reply, then the reply with
  its `toolCalls`);
- a record with a `$set` object merges into the session's metadata; a `$set.messages` list
  replaces every message (`updateMessagesFromHistory`: at a resume, after a compression or a
  rewind, the history the CLI now holds, each as `{id, type, content: parts}`);
- a record with string `sessionId` and `projectHash` (and no `id`) is a header, merged into the
  metadata; a resume in the same UTC minute appends a second one (the file name is the minute's,
  `session-<YYYY-MM-DDTHH-MM>-<sid[:8]>.jsonl`, so the resume's fresh file is this one);
- anything else is counted as a diagnostic (the loader skips it silently).

**The context as Gemini sends it** (`Conversation.messages`, Pi-shaped, see
`ds4sessions.agents.base`): the messages in the loader's order, converted the way
packages/core/src/utils/sessionUtils.ts `convertSessionToClientHistory` rebuilds the history:
user parts (text, `inlineData` images, `functionResponse` → a tool result each), model parts (text,
`functionCall` → a tool call; when the content holds neither calls nor thought parts, the
recorded `toolCalls` are the calls), without thought parts and `thoughts`
(packages/core/src/core/geminiChat.ts drops thought parts from the history it sends:
`stripThoughts`, and from the response it keeps). What the live recording adds once is not
doubled: a live reply's tool results are the following user record (the CLI records the
`functionResponse` it sends), never the `result` inside `toolCalls`; after a resume the CLI's
own snapshot holds both (its `<id>_response` entry and the user record), as the CLI then sends
them. `info`/`warning`/`error` records with a text are the CLI's screen messages, never sent; an
`info` record whose content is parts is a binary injection the CLI does send
(geminiChat.ts `extractBinaryInjections`). User texts starting with `/` or `?` are local commands
(`isIgnoredUserContent`). The `<session_context>` message and the `<state_snapshot>` (with the
model's "Got it. Thanks for the additional context!") are marked with their own categories.

**Requests**: one per distinct `gemini` record holding `tokens` (chatRecordingService.ts
`recordMessageTokens`: the usage of one API response, given to one reply), counted once
whichever copies repeat it (upserts, `$set.messages` snapshots that keep an existing message);
the first appearance fixes its place. `tokens.input` is `promptTokenCount` (the cache included),
`cached` `cachedContentTokenCount`, `output` `candidatesTokenCount`, `thoughts`
`thoughtsTokenCount` (billed as output), `tool` `toolUsePromptTokenCount`; as disjoint `Usage`:
input = input − cached, cache_read = cached, output = output + thoughts (reasoning = thoughts).
The compression's own calls are recorded nowhere (gemini-cli-format.md) and are not requests here.

**Compressions**: a `$set.messages` whose list brings a new `<state_snapshot>` user message
(packages/core/src/context/chatCompressionService.ts: the snapshot, the model's
acknowledgement, then the kept tail). The file does not say whether `/compress` or the
threshold triggered it; it is recorded as `kind="auto"`, `tokens_before` = the last request's
`tokens.input` (what the CLI compares with its threshold: `getLastPromptTokenCount`).

`feed()` never raises for file content; `conversation()` is O(messages) with each message
converted once (memoised by record).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ds4sessions.agents.base import LineDiagnostic, Capabilities, Compaction, Conversation, MessageMeta, Request, Usage
from ds4sessions.agents.common import iso_seconds
from ds4sessions.agents.gemini import models
from ds4sessions.agents.gemini.discovery import GEMINI_CLI
from ds4sessions.ingest import limits
from ds4sessions.ingest.limits import OversizedLine

try:
    import orjson

    def _loads(raw: bytes) -> Any:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:  # (integers beyond 64 bits: the standard library reads them)
            return json.loads(raw)
except ImportError:  # pragma: no cover - orjson is a dependency
    _loads = json.loads

CAPABILITIES = Capabilities(
    ds4_plan=True,  # a what-if: "what DS4 would send" (ds4_exact False)
    retrieval=False,  # DS4 retrieves entries outside the context: the reader keeps the context only
    steering=False,
    bridge=False,
    cache_ttl_recorded=False,
    read_only_reason="Gemini CLI sessions are Gemini CLI's own append-only record; ds4tui only reads them "
    "(only Pi sessions can be steered)",
)
"""What ds4tui offers for Gemini CLI sessions: read-only, DS4's plan as a what-if, no retrieval."""

PROVIDER = "google"
"""The provider of the models Gemini CLI talks to (the bundled model table's `google/<id>`)."""

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line read: a `$set.messages` record holds the whole history (images inline)."""

MAX_KEPT_DIAGNOSTICS = 200
"""Diagnostics kept for display (all are counted)."""

EXCERPT = 80
"""Characters of a bad line quoted in a diagnostic."""

ACKNOWLEDGEMENT = "Got it. Thanks for the additional context!"
"""The model turn chatCompressionService.ts puts after the `<state_snapshot>`."""

LOCAL_PREFIXES = ("/", "?")
"""User texts the CLI handles itself (sessionUtils.ts `isIgnoredUserContent`): never sent."""


GeminiDiagnostic = LineDiagnostic
"""(`agents.base.LineDiagnostic`: the neutral counted problem of a line-based reader.)"""


@dataclass(slots=True)
class _Entry:
    """One message as the loader holds it: the record, "record" (appended on its own) or
    "history" (from a `$set.messages` list, content = the history's parts), its line."""

    record: Mapping[str, Any]
    shape: str
    line_no: int


@dataclass(slots=True)
class _Request:
    usage: Usage
    tokens: Mapping[str, int]
    timestamp: float | None
    model: str | None
    line_no: int


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _parts(content: Any) -> list[Mapping[str, Any]]:
    """A recorded `content` as a list of parts (sessionUtils.ts `ensurePartArray`)."""
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, Mapping):
        return [content]
    if isinstance(content, list):
        return [p if isinstance(p, Mapping) else {"text": p} if isinstance(p, str) else {"other": p} for p in content]
    return []


def _text_of(parts: Sequence[Mapping[str, Any]]) -> str:
    return "".join(p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought"))


def _js(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def usage_of(tokens: Mapping[str, Any]) -> tuple[Usage, dict[str, int]] | None:
    """(disjoint `Usage`, the recorded counts) of a `tokens` object, None when `input` is not a
    count. `input` includes `cached`; `thoughts` are billed as output (module doc)."""
    inp = _int(tokens.get("input"))
    if inp is None:
        return None
    counts = {k: _int(tokens.get(k)) or 0 for k in ("output", "cached", "thoughts", "tool", "total")}
    counts["input"] = inp
    cached = min(counts["cached"], inp)
    usage = Usage(input=inp - cached, cache_read=cached, output=counts["output"] + counts["thoughts"],
                  reasoning=counts["thoughts"])
    return usage, counts


def _response_text(response: Any) -> tuple[str, bool]:
    """(the text of a `functionResponse.response`, is it an error): its `output` or `error`
    string when that is all it holds, else its JSON."""
    if isinstance(response, Mapping) and len(response) == 1:
        for key in ("output", "error", "content"):
            if isinstance(response.get(key), str):
                return response[key], key == "error"
    if isinstance(response, str):
        return response, False
    return _js(response), isinstance(response, Mapping) and "error" in response


def _image(part: Mapping[str, Any]) -> dict[str, Any]:
    data = part.get("inlineData") if isinstance(part.get("inlineData"), Mapping) else {}
    return {"type": "image", "data": str(data.get("data") or ""), "mimeType": str(data.get("mimeType") or "")}


def convert(entry_id: str, record: Mapping[str, Any], shape: str, after_snapshot: bool = False,
            provider: str = PROVIDER) -> tuple[list[dict[str, Any]], list[MessageMeta], int]:
    """One recorded message as Pi-shaped messages with their meta, and the characters of its
    thoughts (recorded, never sent). See the module doc for the rules; [] for a message the CLI
    does not send."""
    kind = record.get("type")
    when = iso_seconds(record.get("timestamp"))
    ms = when * 1000 if when is not None else None
    parts = _parts(record.get("content"))
    messages: list[dict[str, Any]] = []
    metas: list[MessageMeta] = []
    if kind == "user" or (kind == "info" and isinstance(record.get("content"), list)):
        text = _text_of(parts).strip()
        if kind == "user" and shape == "record" and text.startswith(LOCAL_PREFIXES) and not any(
                "functionResponse" in p for p in parts):
            return [], [], 0
        blocks: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for part in parts:
            if isinstance(part.get("functionResponse"), Mapping):
                fr = part["functionResponse"]
                body, error = _response_text(fr.get("response"))
                name = fr.get("name") if isinstance(fr.get("name"), str) else "?"
                results.append({"role": "toolResult", "toolCallId": fr.get("id") if isinstance(fr.get("id"), str) else None,
                                "toolName": name, "content": [{"type": "text", "text": body}], "isError": error,
                                "timestamp": ms})
            elif isinstance(part.get("inlineData"), Mapping):
                (results[-1]["content"] if results else blocks).append(_image(part))
            elif isinstance(part.get("text"), str):
                (results[-1]["content"] if results and not blocks else blocks).append({"type": "text", "text": part["text"]})
            elif isinstance(part.get("fileData"), Mapping):
                blocks.append({"type": "text", "text": f"[file: {part['fileData'].get('fileUri', '?')}]"})
            else:
                blocks.append({"type": "text", "text": _js(part)})
        if blocks:
            if text.startswith("<session_context>"):
                messages.append({"role": "custom", "customType": "session_context", "display": False, "content": blocks,
                                 "ds4Category": "session_context", "timestamp": ms})
                metas.append(MessageMeta(entry_id, category="session_context", source="session_context"))
            elif text.startswith("<state_snapshot>"):
                messages.append({"role": "compactionSummary", "summary": _text_of(parts), "ds4Category": "state_snapshot",
                                 "timestamp": ms})
                metas.append(MessageMeta(entry_id, category="state_snapshot", source="state_snapshot"))
            else:
                messages.append({"role": "user", "content": blocks, "timestamp": ms})
                metas.append(MessageMeta(entry_id, source="prompt" if kind == "user" else "info.binary"))
        for result in results:
            messages.append(result)
            metas.append(MessageMeta(entry_id, tool=result["toolName"], source="functionResponse"))
        return messages, metas, 0
    if kind != "gemini":
        return [], [], 0  # info / warning / error screen messages: never sent
    thought_chars = 0
    blocks = []
    calls = any(isinstance(p.get("functionCall"), Mapping) for p in parts)
    thought_parts = any(p.get("thought") for p in parts)
    for part in parts:
        if part.get("thought"):
            thought_chars += len(str(part.get("text", "")))
        elif isinstance(part.get("functionCall"), Mapping):
            fc = part["functionCall"]
            blocks.append({"type": "toolCall", "id": fc.get("id") if isinstance(fc.get("id"), str) else None,
                           "name": fc.get("name") if isinstance(fc.get("name"), str) else "?",
                           "arguments": fc.get("args") if fc.get("args") is not None else {}})
        elif isinstance(part.get("text"), str):
            if part["text"]:
                blocks.append({"type": "text", "text": part["text"]})
        else:
            blocks.append({"type": "text", "text": _js(part)})
    for thought in record.get("thoughts") or () if isinstance(record.get("thoughts"), list) else ():
        if isinstance(thought, Mapping):
            thought_chars += len(str(thought.get("subject") or "")) + len(str(thought.get("description") or ""))
    if not calls and not thought_parts and isinstance(record.get("toolCalls"), list):
        for call in record["toolCalls"]:
            if isinstance(call, Mapping):
                blocks.append({"type": "toolCall", "id": call.get("id") if isinstance(call.get("id"), str) else None,
                               "name": call.get("name") if isinstance(call.get("name"), str) else "?",
                               "arguments": call.get("args") if call.get("args") is not None else {}})
    if not blocks:
        return [], [], thought_chars
    message: dict[str, Any] = {"role": "assistant", "content": blocks, "api": "gemini", "provider": provider,
                               "model": record.get("model") if isinstance(record.get("model"), str) else None,
                               "stopReason": "toolUse" if any(b["type"] == "toolCall" for b in blocks) else "stop",
                               "timestamp": ms}
    ack = after_snapshot and _text_of(parts).strip() == ACKNOWLEDGEMENT
    if ack:
        message["ds4Category"] = "state_snapshot"
    tool = next((b["name"] for b in blocks if b["type"] == "toolCall"), None)
    metas.append(MessageMeta(entry_id, category="state_snapshot" if ack else None, tool=tool, source="gemini"))
    messages.append(message)
    return messages, metas, thought_chars


class GeminiReader:
    """Incremental reader of one Gemini CLI session file (one instance per file, one thread).

    `feed(lines)` takes complete lines `(line_no, byte_offset, raw_bytes)`; `conversation()`
    returns the frozen `Conversation` after everything fed. `compression_threshold`: the user's
    `model.compressionThreshold` (a fraction; None: the CLI's default), `parent`: the parent
    session id of a subagent file, `project_root`: the project folder (`projects.json`), the
    conversation's `cwd` when the header names no directory. Memory: the messages of the current context, and a few numbers
    per request."""

    def __init__(self, path: Path, *, compression_threshold: float | None = None, parent: str | None = None,
                 project_root: str | None = None) -> None:
        self.path = Path(path)
        self.compression_setting = compression_threshold
        self.parent = parent
        self.project_root = project_root
        self.entries_read = 0
        self.meta: dict[str, Any] = {}
        self.headers: list[str | None] = []
        self.snapshots = 0
        self.rewinds = 0
        self.record_types: Counter[str] = Counter()
        self.screen_messages: Counter[str] = Counter()
        self.set_keys: Counter[str] = Counter()
        self.last_time: float | None = None
        self._entries: dict[str, _Entry] = {}
        self._requests: dict[str, _Request] = {}
        self._changes: dict[str, tuple[str, str]] = {}
        self._pending_change: tuple[str, str] | None = None
        self.compactions: list[Compaction] = []
        self._snapshot_ids: set[str] = set()
        self._converted: dict[str, tuple[Mapping[str, Any], str, bool, list[dict[str, Any]], list[MessageMeta], int]] = {}
        self._diags: list[GeminiDiagnostic] = []
        self._diag_counts: Counter[str] = Counter()
        self.subagents: dict[str, str] = {}
        self.first_prompt: str | None = None

    # ------------------------------------------------------------------ diagnostics

    def _diag(self, kind: str, message: str, line_no: int | None = None, offset: int | None = None,
              raw: bytes | None = None) -> None:
        self._diag_counts[kind] += 1
        if len(self._diags) < MAX_KEPT_DIAGNOSTICS:
            excerpt = raw.decode("utf-8", "replace")[:EXCERPT] if raw is not None else None
            self._diags.append(GeminiDiagnostic(kind, message, line_no, offset, excerpt))

    def diagnostic_counts(self) -> dict[str, int]:
        """Every diagnostic counted by kind (never capped)."""
        return dict(self._diag_counts)

    # ------------------------------------------------------------------ feeding

    def feed(self, lines: Sequence[tuple[int, int, bytes]]) -> None:
        """Read complete lines; never raises for their content."""
        for line_no, offset, raw in lines:
            self._line(line_no, offset, raw)

    def _line(self, line_no: int, offset: int, raw: bytes) -> None:
        if isinstance(raw, OversizedLine):
            self._diag("oversized", f"line of {raw.length:,} bytes is longer than the {MAX_LINE_BYTES:,}-byte cap; not read",
                       line_no, offset)
            return
        raw = bytes(raw)
        stripped = raw.strip()
        if not stripped:
            return
        if stripped.startswith(b"\xef\xbb\xbf"):
            stripped = stripped[3:]
        try:
            row = _loads(stripped)
        except (ValueError, RecursionError):
            self._diag("malformed", "not valid JSON (the CLI's loader skips it too)", line_no, offset, stripped)
            return
        if not isinstance(row, dict):
            self._diag("non_object", "not a JSON object", line_no, offset, stripped)
            return
        self.entries_read += 1
        if isinstance(row.get("$rewindTo"), str):
            self.record_types["$rewindTo"] += 1
            self._rewind(row["$rewindTo"], line_no, offset)
        elif isinstance(row.get("id"), str):
            self.record_types[f"message.{row.get('type')}"] += 1
            self._message(row["id"], row, "record", line_no, offset)
        elif isinstance(row.get("$set"), dict):
            self.record_types["$set"] += 1
            self._set(row["$set"], line_no, offset)
        elif isinstance(row.get("sessionId"), str) and isinstance(row.get("projectHash"), str):
            self.record_types["header"] += 1
            self.headers.append(row.get("startTime") if isinstance(row.get("startTime"), str) else None)
            self.meta.update(row)
            for message in row.get("messages") or () if isinstance(row.get("messages"), list) else ():
                if isinstance(message, dict) and isinstance(message.get("id"), str):
                    self._message(message["id"], message, "record", line_no, offset)
        else:
            self.record_types["unknown"] += 1
            self._diag("unknown_record", "a record the CLI's loader does not know (no id, $set, $rewindTo or header)",
                       line_no, offset, stripped)

    def _message(self, mid: str, row: Mapping[str, Any], shape: str, line_no: int, offset: int) -> None:
        when = iso_seconds(row.get("timestamp"))
        if when is not None and shape == "record":
            self.last_time = when
        kind = row.get("type")
        if kind == "user" and self.first_prompt is None:  # (the loader's `firstUserMessage`: the session's name)
            text = _text_of(_parts(row.get("content"))).strip()
            if text and not text.startswith((*LOCAL_PREFIXES, "<session_context>", "<hook_context>")):
                self.first_prompt = " ".join(text.split())[:200]
        if kind in ("info", "warning", "error") and not isinstance(row.get("content"), list):
            self.screen_messages[str(kind)] += 1
        self._entries[mid] = _Entry(row, shape, line_no)
        if kind == "gemini":
            tokens = row.get("tokens")
            if isinstance(tokens, Mapping):
                self._request(mid, row, tokens, when, line_no, offset)
            for call in row.get("toolCalls") or () if isinstance(row.get("toolCalls"), list) else ():
                if isinstance(call, Mapping) and isinstance(call.get("agentId"), str):
                    self.subagents[call["agentId"]] = str(call.get("name") or "?")

    def _request(self, mid: str, row: Mapping[str, Any], tokens: Mapping[str, Any], when: float | None, line_no: int,
                 offset: int) -> None:
        parsed = usage_of(tokens)
        if parsed is None:
            self._diag("bad_tokens", f"reply {mid[:8]}: tokens without a count in `input`; not counted", line_no, offset)
            return
        usage, counts = parsed
        model = row.get("model") if isinstance(row.get("model"), str) else None
        known = self._requests.get(mid)
        if known is not None:  # the same request again (an upsert, a snapshot keeping it): once
            known.usage, known.tokens = usage, counts
            known.model = model or known.model
            known.timestamp = known.timestamp if known.timestamp is not None else when
            return
        self._requests[mid] = _Request(usage, counts, when, model, line_no)
        if self._pending_change is not None:
            self._changes[mid] = self._pending_change
            self._pending_change = None

    def _rewind(self, target: str, line_no: int, offset: int) -> None:
        self.rewinds += 1
        self._pending_change = ("context edit", "the conversation was rewound (/rewind) since the previous request")
        if target in self._entries:
            ids = list(self._entries)
            for mid in ids[ids.index(target):]:
                del self._entries[mid]
        else:
            self._entries.clear()
            self._diag("rewind_unknown", f"$rewindTo names a message not in the session ({target[:12]}): every message "
                       "dropped, as the CLI's loader does", line_no, offset)

    def _set(self, update: Mapping[str, Any], line_no: int, offset: int) -> None:
        for key in update:
            self.set_keys[str(key)] += 1
        messages = update.get("messages")
        if isinstance(messages, list):
            self.snapshots += 1
            before = set(self._entries)
            last = self._last_request()
            self._entries.clear()
            for message in messages:
                if isinstance(message, dict) and isinstance(message.get("id"), str):
                    self._message(message["id"], message, "history", line_no, offset)
            snapshot = next((mid for mid, e in self._entries.items() if e.record.get("type") == "user"
                             and _text_of(_parts(e.record.get("content"))).lstrip().startswith("<state_snapshot>")), None)
            if snapshot is not None and snapshot not in before and snapshot not in self._snapshot_ids:
                self._snapshot_ids.add(snapshot)
                self.compactions.append(Compaction(snapshot, self.last_time, "auto",
                                                   last.tokens["input"] if last is not None else None))
                self._pending_change = ("compaction", "Gemini CLI compressed the history into a <state_snapshot> "
                                        "since the previous request")
        self.meta.update({k: v for k, v in update.items() if k != "messages"})

    def _last_request(self) -> _Request | None:
        return next(reversed(self._requests.values()), None) if self._requests else None

    # ------------------------------------------------------------------ results

    def _messages(self) -> tuple[list[dict[str, Any]], list[MessageMeta], dict[str, int], int]:
        """(messages, meta, entry id → index of its first message, thought characters in context)."""
        messages: list[dict[str, Any]] = []
        metas: list[MessageMeta] = []
        starts: dict[str, int] = {}
        thoughts = 0
        after_snapshot = False
        cache = self._converted
        alive = set()
        for mid, entry in self._entries.items():
            alive.add(mid)
            known = cache.get(mid)
            if known is not None and known[0] is entry.record and known[1] == entry.shape and known[2] == after_snapshot:
                converted, meta, chars = known[3], known[4], known[5]
            else:
                converted, meta, chars = convert(mid, entry.record, entry.shape, after_snapshot)
                cache[mid] = (entry.record, entry.shape, after_snapshot, converted, meta, chars)
            starts[mid] = len(messages)
            messages.extend(converted)
            metas.extend(meta)
            thoughts += chars
            after_snapshot = bool(meta) and meta[-1].category == "state_snapshot" and converted[-1].get("role") != "assistant"
        if len(cache) > 2 * max(len(alive), 64):
            for mid in [m for m in cache if m not in alive]:
                del cache[mid]
        return messages, metas, starts, thoughts

    def _cwd(self) -> str | None:
        directories = self.meta.get("directories")
        if isinstance(directories, list) and directories and isinstance(directories[0], str):
            return directories[0]
        return self.project_root

    @property
    def compression_threshold(self) -> tuple[float, str]:
        """(the fraction of the window at which the CLI compresses, where it comes from)."""
        if self.compression_setting is not None:
            return self.compression_setting, "model.compressionThreshold in settings.json"
        return models.compression_default(), "Gemini CLI's default (model.compressionThreshold not set)"

    def conversation(self) -> Conversation:
        """The frozen state after everything fed so far."""
        messages, metas, starts, thought_chars = self._messages()
        requests: list[Request] = []
        thoughts_in_context = 0
        tool_tokens = 0
        causes: dict[int, tuple[str, str]] = {}
        for index, (mid, r) in enumerate(self._requests.items()):
            position = starts.get(mid)
            if position is not None:
                thoughts_in_context += r.tokens.get("thoughts", 0)
            tool_tokens += r.tokens.get("tool", 0)
            if mid in self._changes:
                causes[index] = self._changes[mid]
            requests.append(Request(index=index, usage=r.usage, entry_id=mid, timestamp=r.timestamp,
                                    model=r.model, provider=PROVIDER, message_index=position))
        last = self._last_request()
        model = (last.model if last is not None else None) or next(
            (e.record["model"] for e in reversed(self._entries.values()) if isinstance(e.record.get("model"), str)), None)
        window, window_source = models.context_window(model)
        fraction, fraction_source = self.compression_threshold
        context = last.tokens["input"] if last is not None else None
        anchored = bool(requests) and requests[-1].message_index is not None
        threshold = int(fraction * window) if window else None
        summary = self.meta.get("summary") if isinstance(self.meta.get("summary"), str) else None
        title = summary if summary and self.meta.get("kind") != "subagent" else self.first_prompt
        extra: dict[str, Any] = {
            "sessionId": self.meta.get("sessionId"),
            "kind": self.meta.get("kind"),
            "projectHash": self.meta.get("projectHash"),
            "summary": self.meta.get("summary"),
            "directories": self.meta.get("directories"),
            "startTimes": list(self.headers),
            "lastUpdated": self.meta.get("lastUpdated"),
            "contextTokens": context,
            "contextAnchored": anchored,
            "contextSource": "the last request's tokens.input (promptTokenCount: Gemini CLI's own count)",
            "windowSource": window_source,
            "compression": {"fraction": fraction, "source": fraction_source, "threshold": threshold,
                            "tokensUntil": (threshold - context) if threshold is not None and context is not None else None,
                            "rule": "chatCompressionService.ts: compress when the last prompt ≥ fraction × tokenLimit(model)"},
            "compressions": len(self.compactions),
            "snapshots": self.snapshots,
            "rewinds": self.rewinds,
            "thoughtsTokens": thoughts_in_context,
            "thoughtChars": thought_chars,
            "toolUsePromptTokens": tool_tokens,
            "screenMessages": dict(self.screen_messages),
            "subagents": dict(self.subagents),
            "missCauses": {str(k): list(v) for k, v in causes.items()},
            "recordTypes": dict(self.record_types),
            "setKeys": dict(self.set_keys),
            "diagnosticCounts": dict(self._diag_counts),
            "lastTime": self.last_time,
        }
        return Conversation(
            agent=GEMINI_CLI,
            path=self.path,
            capabilities=CAPABILITIES,
            messages=tuple(messages),
            meta=tuple(metas),
            requests=tuple(requests),
            compactions=tuple(self.compactions),
            session_id=self.meta.get("sessionId") if isinstance(self.meta.get("sessionId"), str) else None,
            title=title,
            cwd=self._cwd(),
            model=model,
            provider=PROVIDER,
            context_window=window,
            leaf_id=next(reversed(self._entries), None) if self._entries else None,
            entries=self.entries_read,
            diagnostics=tuple(self._diags),
            parent=self.parent,
            extra=extra,
        )


def read_session(path: Path, **options: Any) -> GeminiReader:
    """A `GeminiReader` fed the whole file at `path` (streamed: one read chunk in memory at a
    time; a line over `MAX_LINE_BYTES` reported, not read). Raises OSError when unreadable."""
    reader = GeminiReader(path, **options)
    with open(path, "rb") as f:
        for line_no, offset, raw, _ in limits.iter_lines(f, cap=MAX_LINE_BYTES):
            reader._line(line_no, offset, raw)
    return reader
