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

`extend_context` derives the context after an append from the previous one when the new entries
only extend the branch (the common case while Pi works), in O(new entries) plus list copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Sequence

from ds4sessions.agents.pi.entries import (
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
    StandIn,
)
from ds4sessions.agents.pi.reader import PiSession

try:
    from ds4sessions.agents.pi import _cprep
except ImportError:  # pragma: no cover - built without a C compiler: the Python loops
    _cprep = None  # type: ignore[assignment]

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
    - `warnings`: `ContextWarning`s (never affect the messages);
    - `context_edits`: the context edits in force among the selected entries (target id → its
      replacement; §7 step 4) and `indexed_ids`: how many ids the session indexed when this was
      built — both what `extend_context` needs; not part of Pi's shape;
    - `chain`: the branch's entries when `build_context` found the session to be one chain
      (`_cprep.linear_path`), else None: while the session holds `len(chain)` entries,
      `by_id[branch_entry_ids[i]]` is `chain[i]`, so a scan of the branch needs no id lookup.
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
    context_edits: dict[str, Any] = field(default_factory=dict, repr=False)
    indexed_ids: int = field(default=0, repr=False, compare=False)
    chain: list[Entry] | None = field(default=None, repr=False, compare=False)

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
    return _branch(session, leaf_id)[0]


def _branch(session: PiSession, leaf_id: str | None) -> tuple[list[Entry], bool]:
    """`branch_path(session, leaf_id)` and whether it is the session's one chain
    (`_cprep.linear_path` answered)."""
    get = session.by_id.get
    leaf = get(leaf_id) if leaf_id is not None else None
    if leaf is None:
        leaf = session.leaf
    if leaf is None:
        return [], False
    if _cprep is not None and leaf is session.leaf and type(session.entries) is list and type(session.by_id) is dict:
        # A session that is one chain in file order (most are): its whole list, checked in one
        # pass without a dict lookup per entry (`_cprep.linear_path`; 0.06 s at 200,000 entries).
        chain = _cprep.linear_path(session.entries, session.by_id, Entry)
        if chain is not None:
            return chain, True
    # Without a cycle the walk meets distinct entries, all in `by_id` but perhaps the leaf: at
    # most len(by_id) + 1. So the walk is bounded by that and needs no set of the entries seen
    # (a third of its time on 200,000 entries, issue 14); one that runs longer has met an entry
    # twice and is walked again the careful way.
    path: list[Entry] = []
    append = path.append
    current = leaf
    for _ in range(len(session.by_id) + 1):
        append(current)
        parent = current.parent_id
        if parent is None:
            break
        current = get(parent)
        if current is None:
            break
    else:
        return _branch_path_with_cycle(leaf, get), False
    path.reverse()
    return path, False


def _branch_path_with_cycle(leaf: Entry, get: Callable[[str], Entry | None]) -> list[Entry]:
    """`branch_path` from `leaf` for a walk that meets an entry twice: cut before the repeat."""
    path: list[Entry] = []
    seen: set[int] = set()
    current: Entry | None = leaf
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        path.append(current)
        parent = current.parent_id
        current = get(parent) if parent is not None else None
    path.reverse()
    return path


def build_context(session: PiSession, leaf_id: str | None = None) -> SessionContext:
    """Build the LLM context Pi would send from `leaf_id` (default: the session's leaf, Pi's leaf
    on load). Pi session format §7; O(path length). Never raises for bad content.
    """
    path, chain = _branch(session, leaf_id)
    warnings = _path_warnings(session, path, leaf_id)

    # The last thinking-level change, model source and compaction on the path win (Pi §7 step
    # 2): found from the end, so a long path costs one list of its types, not a branch per entry.
    types = [entry.type for entry in path]
    thinking_index = _last_index(types, THINKING_LEVEL_CHANGE)
    thinking_level: Any = path[thinking_index].raw.get("thinkingLevel") if thinking_index is not None else "off"
    compaction_index = _last_index(types, COMPACTION)
    model: dict[str, Any] | None = None
    for entry in reversed(path):
        kind = entry.type
        if kind == MODEL_CHANGE:
            model = _present(entry.raw, {"provider": "provider", "modelId": "modelId"})
            break
        if kind == MESSAGE:  # `entry.role == "assistant"`, without two property calls
            message = entry.message
            if message is not None and message.get("role") == "assistant":
                model = _present(message, {"provider": "provider", "modelId": "model"})
                break

    selected = _select(path, compaction_index)
    compaction = path[compaction_index] if compaction_index is not None else None

    edits: dict[str, Any] = {}
    if CONTEXT_EDIT in types:  # (one scan in C: most paths hold no edit; `selected` is part of `path`)
        for entry in selected:
            if entry.type == CONTEXT_EDIT and isinstance(entry.raw.get("targetId"), str) and "replacement" in entry.raw:
                edits[entry.raw["targetId"]] = entry.raw["replacement"]

    if _cprep is not None and not edits and type(selected) is list:  # (`_context_messages` in C: no edit in force)
        messages, message_entry_ids = _cprep.context_messages(
            selected, compaction, Entry, StandIn, lambda entry, cut: _entry_messages(entry, cut, edits)
        )
    else:
        messages, message_entry_ids = _context_messages(selected, compaction, edits)

    warnings.extend(_tool_pairing_warnings(messages, message_entry_ids))
    branch_ids = [entry.id for entry in path]
    return SessionContext(
        messages=messages,
        message_entry_ids=message_entry_ids,
        leaf_id=path[-1].id if path else None,
        branch_entry_ids=branch_ids,
        context_entry_ids=list(branch_ids) if selected is path else [entry.id for entry in selected],
        labels=dict(session.labels),
        model=model,
        thinking_level=thinking_level,
        session_name=session.session_name,
        warnings=warnings,
        context_edits=edits,
        indexed_ids=len(session.by_id),
        chain=path if chain else None,
    )


def _context_messages(
    selected: Sequence[Entry], compaction: Entry | None, edits: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[str | None]]:
    """The messages of the selected entries and the id of the entry each came from (§7 steps
    4-5): `_entry_messages` of each, its common case inlined (`_cprep.context_messages` is this
    loop in C when no edit is in force)."""
    messages: list[dict[str, Any]] = []
    message_entry_ids: list[str | None] = []
    for entry in selected:
        if entry.type == MESSAGE and entry is not compaction:  # the common case of `_entry_messages`
            raw = entry.raw
            message = raw if type(raw) is StandIn else entry.message  # (`Entry.message`'s first case)
            if message is not None and message.get("content", ...) is not None and (not edits or entry.id not in edits):
                messages.append(message)
                message_entry_ids.append(entry.id)
                continue
        for message in _entry_messages(entry, entry is compaction, edits):
            messages.append(message)
            message_entry_ids.append(entry.id)
    return messages, message_entry_ids


#: Entry types that change context built earlier (a new cut, a summary of another branch, an edit
#: of an earlier entry): an append holding one is rebuilt in full (Pi session format §7).
RESHAPING_TYPES = frozenset({COMPACTION, BRANCH_SUMMARY, CONTEXT_EDIT})


def extend_context(
    previous: SessionContext,
    session: PiSession,
    new_entries: Sequence[Entry],
    copy: Callable[[Sequence[Any]], list[Any]] = list,
) -> SessionContext | None:
    """The context `build_context(session)` would build, derived from `previous`, or None.

    `previous` is `build_context` (or `extend_context`) of the same session before
    `new_entries` were read, with the default leaf; `new_entries` are the entries read since,
    in file order (what `PiSessionReader.feed` returned; may be empty). Returns None — rebuild
    in full — unless the append only extends the branch: every new entry has a new, unique id
    (no id of the session is reused: `by_id` grew by exactly one per entry), its parent is the
    previous leaf (the entry before it), it is not a compaction, branch summary or context
    edit (`RESHAPING_TYPES`), and no new id is the missing parent of the branch's root. Labels,
    session name, model and thinking level are updated as `build_context` would; `system`
    messages append like any other. The result equals `build_context(session)`, warnings
    included (Pi session format §7). O(new entries) plus copies of the id and message lists;
    `previous` is not modified. `copy(lst)` makes those copies (a list equal to `lst` that the
    result owns): `list` by default, or copies prepared off the latency path
    (`ds4core.spare.Spares.copy`).
    """
    entries = session.entries
    k = len(new_entries)
    leaf_id = previous.leaf_id
    if leaf_id is None or len(entries) <= k or entries[-k - 1].id != leaf_id or not previous.branch_entry_ids:
        return None
    if len(session.by_id) != previous.indexed_ids + k:
        return None
    parent = leaf_id
    for offset, entry in enumerate(new_entries):
        if entry is not entries[len(entries) - k + offset]:
            return None
        if entry.id is None or entry.parent_id != parent or entry.type in RESHAPING_TYPES:
            return None
        parent = entry.id
    root = session.by_id.get(previous.branch_entry_ids[0] or "")
    if root is None or (root.parent_id is not None and any(e.id == root.parent_id for e in new_entries)):
        return None

    thinking_level = previous.thinking_level
    model = previous.model
    messages = copy(previous.messages)
    message_entry_ids = copy(previous.message_entry_ids)
    edits = previous.context_edits
    unknown: list[ContextWarning] = []
    for entry in new_entries:
        if entry.type == THINKING_LEVEL_CHANGE:
            thinking_level = entry.raw.get("thinkingLevel")
        elif entry.type == MODEL_CHANGE:
            model = _present(entry.raw, {"provider": "provider", "modelId": "modelId"})
        elif entry.role == "assistant":
            model = _present(entry.message or {}, {"provider": "provider", "modelId": "model"})
        for message in _entry_messages(entry, False, edits):
            messages.append(message)
            message_entry_ids.append(entry.id)
        if entry.type not in KNOWN_TYPES:
            unknown.append(_unknown_type_warning(entry))

    leaf = new_entries[-1] if new_entries else entries[-1]
    warnings = [w for w in previous.warnings if w.kind in ("cycle", "unknown_type")] + unknown
    if leaf.type not in CONTEXT_TYPES and not any(e.type in CONTEXT_TYPES for e in new_entries):
        # The newest context entry on the branch is unchanged, so are the entries newer than it
        # that sit on other branches (the new entries are all on the branch).
        warnings.extend(
            _metadata_leaf_warning(leaf, list(w.entry_ids)) for w in previous.warnings if w.kind == "metadata_leaf"
        )
    n = len(previous.messages)
    warnings.extend(w for w in previous.warnings if w.kind == "tool_pairing")
    warnings.extend(_tool_pairing_warnings(messages[n:], message_entry_ids[n:], _open_tool_calls(previous.messages)))
    new_ids = [entry.id for entry in new_entries]
    branch_entry_ids = copy(previous.branch_entry_ids)
    branch_entry_ids.extend(new_ids)
    context_entry_ids = copy(previous.context_entry_ids)
    context_entry_ids.extend(new_ids)
    return SessionContext(
        messages=messages,
        message_entry_ids=message_entry_ids,
        leaf_id=leaf.id,
        branch_entry_ids=branch_entry_ids,
        context_entry_ids=context_entry_ids,
        labels=dict(session.labels),
        model=model,
        thinking_level=thinking_level,
        session_name=session.session_name,
        warnings=warnings,
        context_edits=edits,
        indexed_ids=len(session.by_id),
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


def _last_index(values: list[Any], value: Any) -> int | None:
    """The index of the last item of `values` equal to `value`, or None (one C-level scan)."""
    try:
        return len(values) - 1 - values[::-1].index(value)
    except ValueError:
        return None


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
            warnings.append(_unknown_type_warning(entry))
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
            warnings.append(_metadata_leaf_warning(leaf, newer))
    return warnings


def _unknown_type_warning(entry: Entry) -> ContextWarning:
    return ContextWarning("unknown_type", f"entry {entry.id} ({entry.type}): not in context (unknown type)", (entry.id or "",))


def _metadata_leaf_warning(leaf: Entry, newer: list[str]) -> ContextWarning:
    """The leaf is metadata while `newer` context entries (ids, oldest first) sit on other branches."""
    span = newer[0] if len(newer) == 1 else f"{newer[0]}–{newer[-1]}"
    return ContextWarning(
        "metadata_leaf",
        f"leaf is a metadata entry ({leaf.type}); {len(newer)} newer message entr"
        f"{'y' if len(newer) == 1 else 'ies'} ({span}) are on an inactive branch",
        tuple(newer),
    )


def _call_ids(message: dict[str, Any]) -> set[Any]:
    """Ids of the tool calls an assistant message makes (empty for other messages)."""
    if message.get("role") == "assistant" and isinstance(message.get("content"), list):
        return {block.get("id") for block in message["content"] if isinstance(block, dict) and block.get("type") == "toolCall"}
    return set()


def _open_tool_calls(messages: list[dict[str, Any]]) -> set[Any]:
    """The call ids a tool result appended after `messages` may answer: those of the last
    message that is not a tool result (O(trailing tool results))."""
    for message in reversed(messages):
        if message.get("role") != "toolResult":
            return _call_ids(message)
    return set()


def _tool_pairing_warnings(
    messages: list[dict[str, Any]], entry_ids: list[str | None], call_ids: set[Any] | None = None
) -> list[ContextWarning]:
    """Tool results must follow (after other results only) the assistant message holding their call.

    `call_ids`: the calls open before `messages` (when checking a continuation). The loop runs
    in C (`_cprep.tool_pairing`: which results to warn about) for a list of plain messages."""
    if _cprep is not None and type(messages) is list and (call_ids is None or type(call_ids) in (set, frozenset)):
        n = min(len(messages), len(entry_ids))  # (`zip` stops at the shorter)
        found = _cprep.tool_pairing(messages if n == len(messages) else messages[:n], call_ids, StandIn)
        if found is not None:
            return [_unpaired(messages[i], entry_ids[i]) for i in found]
    warnings: list[ContextWarning] = []
    open_calls: set[Any] | frozenset[Any] = set() if call_ids is None else call_ids
    maker: dict[str, Any] | None = None  # an assistant message whose calls are not collected yet
    for message, entry_id in zip(messages, entry_ids):
        role = message.get("role")
        if role == "toolResult":
            if maker is not None:  # the calls are collected for a message that results follow only
                open_calls, maker = _call_ids(maker), None
            if message.get("toolCallId") not in open_calls:
                warnings.append(_unpaired(message, entry_id))
            continue
        if role == "assistant":
            maker = message
        else:
            open_calls, maker = _NO_CALLS, None
    return warnings


def _unpaired(message: dict[str, Any], entry_id: str | None) -> ContextWarning:
    """The warning for a tool result that does not follow its call (`_tool_pairing_warnings`)."""
    return ContextWarning(
        "tool_pairing",
        f"tool result {entry_id} ({message.get('toolCallId')}) does not directly follow "
        "the assistant message that made the call",
        (entry_id or "",),
    )


_NO_CALLS: frozenset[Any] = frozenset()
"""The calls a message other than an assistant reply makes (`_call_ids`), one object."""


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
