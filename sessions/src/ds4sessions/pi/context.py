"""Pi's LLM context for a leaf: branch path, settings, compaction cut, context edits, messages.

Reimplements `buildSessionContext(entries, leafId)` of Pi's session manager and
`convertToLlm()` of its messages module (Pi session format §7, as of
@earendil-works/pi-coding-agent 1.6.0), checked field by field against the `<name>.context.json`
files Pi itself built (`shared/sessions-pi/`).

Steps (§7):
1. path: leaf → root over `parentId`, reversed (`branch_path`);
2. settings over the whole path: thinking level (default `off`) and model (last `model_change`
   or assistant message);
3. compaction cut: only the last compaction on the path counts — it, then the path entries from
   its `firstKeptEntryId` up to it, then all after it; kept `system` messages before it are
   dropped (1.x: its `systemMessage` replaces them); an older compaction yields nothing;
4. context edits (1.x): per target, the last `context_edit` among the selected entries omits the
   target or replaces its content;
5. entries → agent messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from ds4sessions.pi.entries import (
    BRANCH_SUMMARY,
    COMPACTION,
    CONTEXT_EDIT,
    CONTEXT_TYPES,
    CUSTOM_MESSAGE,
    KNOWN_TYPES,
    MESSAGE,
    MODEL_CHANGE,
    THINKING_LEVEL_CHANGE,
    Entry,
)
from ds4sessions.pi.reader import PiSession

COMPACTION_SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
BRANCH_SUMMARY_SUFFIX = "</summary>"

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class ContextWarning:
    """Something about a built context worth showing: `kind`, a sentence, the entries involved.

    Kinds: `cycle` (the parent chain loops; Pi would hang), `unknown_leaf` (the requested leaf id
    does not exist; the last entry was used, as Pi does), `metadata_leaf` (the leaf is a metadata
    entry while newer message entries sit on another branch), `unknown_type` (an entry of unknown
    type on the path, not in context), `tool_pairing` (a tool result not directly preceded by the
    assistant message holding its tool call).
    """

    kind: str
    message: str
    entry_ids: tuple[str, ...] = ()


@dataclass
class SessionContext:
    """What Pi's `buildSessionContext` returns, plus what ds4tui needs to attribute it.

    - `messages`: agent messages (dicts as Pi builds them) in context order;
    - `message_entry_ids`: for each message, the id of the entry it came from (a compaction
      yields two: its `systemMessage`, then the `compactionSummary`);
    - `leaf_id`: the leaf the path starts from; `branch_entry_ids`: the path, root → leaf;
    - `context_entry_ids`: the entries selected after the compaction cut (the compaction first),
      including entries that yield no message (model changes, labels, context edits…);
    - `labels`, `session_name`: resolved over the whole file (§8);
    - `model`: `{"provider", "modelId"}` or None; `thinking_level`: e.g. `"medium"`;
    - `warnings`: `ContextWarning`s (never affect the messages).
    """

    messages: list[dict[str, Any]]
    message_entry_ids: list[str | None]
    leaf_id: str | None
    branch_entry_ids: list[str | None]
    context_entry_ids: list[str | None]
    labels: dict[str, str]
    model: dict[str, Any] | None
    thinking_level: Any
    session_name: str | None
    warnings: list[ContextWarning] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The shape of Pi's `<name>.context.json` (without `llmMessages`; see `convert_to_llm`)."""
        return {
            "leafId": self.leaf_id,
            "sessionName": self.session_name,
            "model": self.model,
            "thinkingLevel": self.thinking_level,
            "branchEntryIds": list(self.branch_entry_ids),
            "contextEntryIds": list(self.context_entry_ids),
            "labels": dict(self.labels),
            "messages": self.messages,
        }


def iso_to_ms(timestamp: str) -> int | None:
    """Unix milliseconds of an ISO-8601 timestamp (JavaScript `new Date(s).getTime()`).

    `"2026-03-02T08:41:13.726Z"` → 1772440873726. A timestamp without an offset is taken as UTC.
    Returns None for an unparsable one (Pi gets NaN, which JSON writes as null).
    """
    try:
        parsed = datetime.fromisoformat(timestamp)
    except (TypeError, ValueError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return (parsed - _EPOCH) // _MS


def branch_path(session: PiSession, leaf_id: str | None = None) -> list[Entry]:
    """The entries from the root to the leaf (Pi session format §7 step 1).

    The leaf is `session.by_id[leaf_id]`, or the last entry in file order when `leaf_id` is None
    or unknown (Pi falls back the same way). The walk follows `parent_id` until it is None or names
    no entry; unlike Pi it also stops when an entry repeats (a `parentId` cycle). O(path length).
    """
    leaf = session.by_id.get(leaf_id) if leaf_id is not None else None
    if leaf is None:
        leaf = session.leaf
    path: list[Entry] = []
    seen: set[int] = set()
    current = leaf
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        path.append(current)
        current = session.by_id.get(current.parent_id) if current.parent_id is not None else None
    path.reverse()
    return path


def build_context(session: PiSession, leaf_id: str | None = None) -> SessionContext:
    """Build the LLM context Pi would send from `leaf_id` (default: the session's leaf, Pi's leaf
    on load). Pi session format §7; O(path length). Never raises for bad content.
    """
    path = branch_path(session, leaf_id)
    warnings = _path_warnings(session, path, leaf_id)

    thinking_level: Any = "off"
    model: dict[str, Any] | None = None
    compaction_index: int | None = None
    for index, entry in enumerate(path):
        if entry.type == THINKING_LEVEL_CHANGE:
            thinking_level = entry.raw.get("thinkingLevel")
        elif entry.type == MODEL_CHANGE:
            model = _present(entry.raw, {"provider": "provider", "modelId": "modelId"})
        elif entry.type == COMPACTION:
            compaction_index = index
        elif entry.role == "assistant":
            model = _present(entry.message or {}, {"provider": "provider", "modelId": "model"})

    selected = _select(path, compaction_index)
    compaction = path[compaction_index] if compaction_index is not None else None

    edits: dict[str, Any] = {}
    for entry in selected:
        if entry.type == CONTEXT_EDIT and isinstance(entry.raw.get("targetId"), str) and "replacement" in entry.raw:
            edits[entry.raw["targetId"]] = entry.raw["replacement"]

    messages: list[dict[str, Any]] = []
    message_entry_ids: list[str | None] = []
    for entry in selected:
        for message in _entry_messages(entry, entry is compaction, edits):
            messages.append(message)
            message_entry_ids.append(entry.id)

    warnings.extend(_tool_pairing_warnings(messages, message_entry_ids))
    return SessionContext(
        messages=messages,
        message_entry_ids=message_entry_ids,
        leaf_id=path[-1].id if path else None,
        branch_entry_ids=[entry.id for entry in path],
        context_entry_ids=[entry.id for entry in selected],
        labels=dict(session.labels),
        model=model,
        thinking_level=thinking_level,
        session_name=session.session_name,
        warnings=warnings,
    )


def convert_to_llm(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pi's `convertToLlm()` (Pi session format §7): agent messages → provider messages.

    `system`, `user`, `assistant`, `toolResult` pass through unchanged; `bashExecution` becomes a
    user text message (dropped when `excludeFromContext`); `custom` becomes a user message (string
    content → one text block); `branchSummary` / `compactionSummary` become user text with Pi's
    fixed wrappers; unknown roles are dropped. Provider-adapter steps (dropping errored/aborted
    assistant messages, placeholder tool results) are not applied.
    """
    result: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "user", "assistant", "toolResult"):
            result.append(message)
        elif role == "bashExecution":
            if not message.get("excludeFromContext"):
                result.append(_user_text(_bash_execution_text(message), message))
        elif role == "custom":
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            result.append(_with_timestamp({"role": "user", "content": content}, message))
        elif role == "branchSummary":
            result.append(_user_text(BRANCH_SUMMARY_PREFIX + _js_str(message.get("summary")) + BRANCH_SUMMARY_SUFFIX, message))
        elif role == "compactionSummary":
            text = COMPACTION_SUMMARY_PREFIX + _js_str(message.get("summary")) + COMPACTION_SUMMARY_SUFFIX
            result.append(_user_text(text, message))
    return result


def _present(source: dict[str, Any], keys: dict[str, str]) -> dict[str, Any]:
    """`{out_key: source[in_key]}` for the keys present (JSON.stringify drops undefined ones)."""
    return {out_key: source[in_key] for out_key, in_key in keys.items() if in_key in source}


def _select(path: list[Entry], compaction_index: int | None) -> list[Entry]:
    """The entries kept after the compaction cut (§7 step 3), the compaction first."""
    if compaction_index is None:
        return path
    compaction = path[compaction_index]
    first_kept = compaction.raw.get("firstKeptEntryId")
    kept: list[Entry] = []
    if first_kept != compaction.id:
        for index in range(compaction_index):
            if path[index].id == first_kept:
                kept = [e for e in path[index:compaction_index] if e.role != "system"]
                break
    return [compaction, *kept, *path[compaction_index + 1 :]]


def _entry_messages(entry: Entry, is_last_compaction: bool, edits: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent messages one selected entry contributes (§7 steps 4-5)."""
    raw = entry.raw
    if entry.type == MESSAGE:
        message = entry.message
        if message is None:
            return []
        if message.get("content", ...) is None:  # 1.x: null content becomes "" / []
            empty: Any = [] if message.get("role") in ("assistant", "toolResult") else ""
            message = {**message, "content": empty}
        return _edited(message, entry.id, edits)
    if entry.type == COMPACTION:
        if not is_last_compaction:
            return []
        messages = [raw["systemMessage"]] if isinstance(raw.get("systemMessage"), dict) else []
        summary = _present(raw, {"summary": "summary", "tokensBefore": "tokensBefore"})
        messages.append({"role": "compactionSummary", **summary, "timestamp": iso_to_ms(entry.timestamp)})
        return messages
    if entry.type == BRANCH_SUMMARY:
        if not raw.get("summary"):
            return []
        fields = _present(raw, {"summary": "summary", "fromId": "fromId"})
        return [{"role": "branchSummary", **fields, "timestamp": iso_to_ms(entry.timestamp)}]
    if entry.type == CUSTOM_MESSAGE:
        fields = _present(
            raw, {"customType": "customType", "content": "content", "display": "display", "details": "details"}
        )
        return _edited({"role": "custom", **fields, "timestamp": iso_to_ms(entry.timestamp)}, entry.id, edits)
    return []


def _edited(message: dict[str, Any], entry_id: str | None, edits: dict[str, Any]) -> list[dict[str, Any]]:
    """Apply the context edit for `entry_id`, if any: None omits, `{content}` replaces content."""
    if entry_id is None or entry_id not in edits:
        return [message]
    replacement = edits[entry_id]
    if replacement is None:
        return []
    if isinstance(replacement, dict) and "content" in replacement:
        return [{**message, "content": replacement["content"]}]
    return [message]


def _path_warnings(session: PiSession, path: list[Entry], leaf_id: str | None) -> list[ContextWarning]:
    warnings: list[ContextWarning] = []
    if leaf_id is not None and leaf_id not in session.by_id:
        warnings.append(ContextWarning("unknown_leaf", f"leaf {leaf_id} does not exist; using the last entry"))
    if not path:
        return warnings
    root = path[0]
    if root.parent_id is not None and root.parent_id in session.by_id:
        warnings.append(
            ContextWarning("cycle", f"parent chain loops at entry {root.id}; path cut there", (root.id or "",))
        )
    for entry in path:
        if entry.type not in KNOWN_TYPES:
            warnings.append(
                ContextWarning("unknown_type", f"entry {entry.id} ({entry.type}): not in context (unknown type)", (entry.id or "",))
            )
    leaf = path[-1]
    if leaf.type not in CONTEXT_TYPES:
        on_path = {id(entry) for entry in path}
        last_on_path = max((e.line_no for e in path if e.type in CONTEXT_TYPES), default=0)
        newer: list[str] = []
        for entry in reversed(session.entries):
            if entry.line_no <= last_on_path:
                break
            if entry.type in CONTEXT_TYPES and id(entry) not in on_path:
                newer.append(entry.id or f"line {entry.line_no}")
        if newer:
            newer.reverse()
            span = newer[0] if len(newer) == 1 else f"{newer[0]}–{newer[-1]}"
            warnings.append(
                ContextWarning(
                    "metadata_leaf",
                    f"leaf is a metadata entry ({leaf.type}); {len(newer)} newer message entr"
                    f"{'y' if len(newer) == 1 else 'ies'} ({span}) are on an inactive branch",
                    tuple(newer),
                )
            )
    return warnings


def _tool_pairing_warnings(messages: list[dict[str, Any]], entry_ids: list[str | None]) -> list[ContextWarning]:
    """Tool results must follow (after other results only) the assistant message holding their call."""
    warnings: list[ContextWarning] = []
    call_ids: set[Any] = set()
    for message, entry_id in zip(messages, entry_ids):
        role = message.get("role")
        if role == "toolResult":
            if message.get("toolCallId") not in call_ids:
                warnings.append(
                    ContextWarning(
                        "tool_pairing",
                        f"tool result {entry_id} ({message.get('toolCallId')}) does not directly follow "
                        "the assistant message that made the call",
                        (entry_id or "",),
                    )
                )
            continue
        call_ids = set()
        if role == "assistant" and isinstance(message.get("content"), list):
            call_ids = {
                block.get("id") for block in message["content"] if isinstance(block, dict) and block.get("type") == "toolCall"
            }
    return warnings


def _js_str(value: Any) -> str:
    """String concatenation the JavaScript way for the values that occur (undefined → "undefined")."""
    if isinstance(value, str):
        return value
    return "undefined" if value is None else str(value)


def _with_timestamp(result: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    if "timestamp" in source:
        result["timestamp"] = source["timestamp"]
    return result


def _user_text(text: str, source: dict[str, Any]) -> dict[str, Any]:
    return _with_timestamp({"role": "user", "content": [{"type": "text", "text": text}]}, source)


def _bash_execution_text(message: dict[str, Any]) -> str:
    """Pi's `bashExecutionToText` (messages module)."""
    text = f"Ran `{_js_str(message.get('command'))}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    exit_code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif exit_code is not None and exit_code != 0:
        text += f"\n\nCommand exited with code {exit_code}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message['fullOutputPath']}]"
    return text
