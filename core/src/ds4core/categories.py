"""What fills the context window, by category, and the pixel map's cells.

Categories follow the `/context` panel of the pi-context extension: system prompt, tools, user
messages, assistant text, thinking, tool calls, tool results (children per tool name), images
(children per the message kind that carries them: `user` or the tool name), bash executions, compaction summary, branch summaries, custom messages (children per custom type),
plus `unattributed` (provider total − estimate, when positive) and free space.

Messages are Pi agent messages (plain dicts, as `buildSessionContext` returns them). The text a
part contributes is what Pi's `convertToLlm()` sends (Pi session format §7): a bash execution
becomes "Ran `cmd`" plus its fenced output, summaries get their fixed preambles; messages that
`convertToLlm` drops (`excludeFromContext` bash runs, unknown roles) contribute nothing.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from itertools import compress, count, islice
from operator import is_not
from dataclasses import dataclass, field
from collections.abc import Mapping, MutableSequence
from typing import Any, Callable, Iterable, NamedTuple, Sequence

from ds4core.jsjson import stringify
from ds4core.tokens import MessageCount, TokenLedger

#: Category ids in display order, with their labels.
CATEGORIES: dict[str, str] = {
    "system_prompt": "System prompt",
    "tools": "Tools",
    "user": "User messages",
    "assistant_text": "Assistant text",
    "thinking": "Thinking",
    "tool_calls": "Tool calls",
    "tool_results": "Tool results",
    "images": "Images",
    "bash": "Bash executions",
    "compaction": "Compaction summary",
    "branch_summary": "Branch summaries",
    "custom": "Custom messages",
    "other": "Other",
    "unattributed": "Unattributed",
    "free": "Free space",
}



@dataclass(frozen=True)
class CategoryTable:
    """An agent's own category vocabulary (issue 28: "the map in that agent's own categories").

    - `labels`: category id → label, in display order (the legend and the JSON list rows in
      this order); ids a breakdown meets that are not here are listed after them, labelled
      "Other: <id>" (never dropped);
    - `roles`: category id → colour role, one of the neutral roles the UI has colours for
      (Pi's own ids, plus `tools_deferred`, `mcp`, `agents`, `memory`, `skills`, `attachments`,
      `instructions`, `environment`, `reasoning`, `web_search`, `reserved`); an id without a
      role is its own role;
    - `reserved`: ids of reserved space (e.g. Claude Code's autocompact buffer): not context
      tokens, never calibrated, drawn after the context and before free space;
    - `aside`: ids of rows listed beside the context but not in it (e.g. Claude Code's deferred
      tool definitions, loaded on demand): never calibrated, never drawn, not in the total and
      not taken from free space.
    """

    labels: Mapping[str, str]
    roles: Mapping[str, str] = field(default_factory=dict)
    reserved: tuple[str, ...] = ()
    aside: tuple[str, ...] = ()

    def label(self, category: str) -> str:
        """The label of `category` ("Other: <id>" for an id the table does not know)."""
        label = self.labels.get(category)
        return label if label is not None else f"Other: {category}"

    def role(self, category: str) -> str:
        """The colour role of `category` (the id itself without one)."""
        return self.roles.get(category, category)


PI_TABLE = CategoryTable(CATEGORIES)
"""Pi's categories (DS4's own vocabulary; every role is the id itself)."""

COMPACTION_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
COMPACTION_SUFFIX = "\n</summary>"
BRANCH_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
BRANCH_SUFFIX = "</summary>"

def js_stringify(value: Any) -> str:
    """JavaScript `JSON.stringify`, with `""` for undefined (as DS4 counts it)."""
    return stringify(value) or ""


Part = tuple[str, "str | None", Any]  # (category, child, payload: str text or image block dict)


def bash_execution_text(message: Mapping[str, Any]) -> str:
    """The user text Pi's `convertToLlm()` makes of a `bashExecution` message (Pi format §7)."""
    text = f"Ran `{message.get('command', '')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif message.get("exitCode") not in (None, 0):
        text += f"\n\nCommand exited with code {message.get('exitCode')}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message.get('fullOutputPath')}]"
    return text


def in_llm_context(message: Mapping[str, Any]) -> bool:
    """False for messages `convertToLlm()` drops: `!!` bash runs and unknown roles."""
    role = message.get("role")
    if role == "bashExecution":
        return not message.get("excludeFromContext")
    return role in {"system", "user", "assistant", "toolResult", "custom", "branchSummary", "compactionSummary"}


def _blocks(content: Any) -> Any:
    """The blocks of a message's `content` as a sequence: a list as it is, nothing for a missing
    or empty value, and any other value (a number, an object: a damaged or hostile file) as one
    block, which is then counted as its JSON text rather than raising `TypeError`."""
    if isinstance(content, list):
        return content
    return (content,) if content else ()


def _content_parts(content: Any, category: str, child: str | None) -> list[Part]:
    if isinstance(content, str):
        return [(category, child, content)]
    parts: list[Part] = []
    for block in _blocks(content):
        if type(block) is not dict and not isinstance(block, Mapping):
            parts.append((category, child, js_stringify(block)))
        elif block.get("type") == "image":
            # Images are their own category (issue 17): their cost follows the counter's image
            # rule (provider-style for cl100k, DS4's flat 1,024 for chars-v1), not the text's.
            parts.append(("images", child or category, block))
        elif isinstance(block.get("text"), str):
            parts.append((category, child, block["text"]))
        else:
            parts.append((category, child, js_stringify(block)))
    return parts


def message_parts(message: Mapping[str, Any]) -> list[Part]:
    """Split one agent message into `(category, child, payload)` parts, in content order.

    A `system` message charges its `content` and `sections` to the system prompt and each entry
    of `toolsAdded` (its JSON definition) to tools, child = tool name. Assistant blocks go to
    assistant text, thinking or tool calls (child = tool name; payload = name + JSON arguments,
    as DS4 counts a tool call). Messages outside the LLM context have no parts.
    """
    if (type(message) is not dict and not isinstance(message, Mapping)) or not in_llm_context(message):
        return []
    role = message.get("role")
    if role == "system":
        parts: list[Part] = []
        if message.get("content"):
            parts += _content_parts(message.get("content"), "system_prompt", None)
        sections = message.get("sections")
        if isinstance(sections, Mapping):
            parts += [("system_prompt", None, v) for v in sections.values() if isinstance(v, str)]
        for tool in _blocks(message.get("toolsAdded")):
            if isinstance(tool, Mapping):
                parts.append(("tools", str(tool.get("name", "?")), js_stringify(tool)))
        return parts or [("system_prompt", None, "")]
    if role == "user":
        return _content_parts(message.get("content"), "user", None)
    if role == "assistant":
        parts = []
        for block in _blocks(message.get("content")):
            kind = block.get("type") if type(block) is dict or isinstance(block, Mapping) else None
            if kind == "text":
                parts.append(("assistant_text", None, str(block.get("text", ""))))
            elif kind == "thinking":
                parts.append(("thinking", None, str(block.get("thinking", ""))))
            elif kind == "toolCall":
                name = block.get("name") if isinstance(block.get("name"), str) else ""
                parts.append(("tool_calls", name or "?", name + js_stringify(block.get("arguments"))))
            else:
                parts.append(("assistant_text", None, js_stringify(block)))
        return parts or [("assistant_text", None, "")]
    if role == "toolResult":
        name = message.get("toolName") if isinstance(message.get("toolName"), str) else "?"
        return _content_parts(message.get("content"), "tool_results", name) or [("tool_results", name, "")]
    if role == "bashExecution":
        return [("bash", None, bash_execution_text(message))]
    if role == "custom":
        kind = str(message.get("customType") or "?")
        return _content_parts(message.get("content"), "custom", kind) or [("custom", kind, "")]
    if role == "branchSummary":
        return [("branch_summary", None, BRANCH_PREFIX + str(message.get("summary", "")) + BRANCH_SUFFIX)]
    if role == "compactionSummary":
        return [("compaction", None, COMPACTION_PREFIX + str(message.get("summary", "")) + COMPACTION_SUFFIX)]
    return []


def counted_parts(ledger: TokenLedger, message: Mapping[str, Any]) -> MessageCount:
    """Tokens of a message by the ledger's counter; zero for messages outside the LLM context."""
    if not in_llm_context(message):
        return MessageCount(0, ())
    return ledger.count(message)


@dataclass
class CategoryRow:
    """One row of the category list: tokens, and children `(name, tokens)` sorted by weight."""

    id: str
    label: str
    tokens: int
    children: list[tuple[str, int]] = field(default_factory=list)
    inferred: bool = False


class Segment(NamedTuple):
    """A run of tokens on the map: one message part (or a synthetic block such as inferred
    system tokens), in context order. `message_index` and `entry_id` name its source.
    A named tuple (immutable, compared by value; cheaper than a frozen dataclass: one or more
    per context message and counter, issue 14)."""

    category: str
    tokens: int
    message_index: int | None
    entry_id: str | None


@dataclass
class Breakdown:
    """Categories and map segments for one context and one counter.

    `rows` are in `CATEGORIES` order and include only non-empty categories plus free space;
    `estimate` is the sum of all segments except unattributed and free (tokens).
    """

    counter: str
    rows: list[CategoryRow]
    segments: list[Segment]
    message_tokens: list[int]
    estimate: int
    context_window: int | None
    unattributed: int
    free: int | None
    table: CategoryTable = field(default=PI_TABLE, compare=False)
    """The vocabulary of the rows (labels, colour roles, reserved ids)."""
    reserved: int = 0
    """Tokens of reserved space (`table.reserved` rows: not context, not in `estimate`)."""


@dataclass(frozen=True)
class Attribution:
    """The message-derived part of a `Breakdown` for one counter: what an append extends.

    - `counter`: the counter's name (`chars-v1`, `cl100k`);
    - `totals`: category → tokens of the messages' parts (parts of 0 tokens are skipped);
    - `children`: category → child (tool name, custom type) → tokens;
    - `segments`: the messages' map segments in context order (no inferred system block, no
      unattributed block: `compose_breakdown` adds those);
    - `message_tokens`: tokens per message (0 for messages outside the LLM context);
    - `total`: `sum(message_tokens)`.

    Treat it as read-only: `attribute(..., previous=...)` copies what it extends.
    """

    counter: str
    totals: dict[str, int]
    children: dict[str, dict[str, int]]
    segments: list[Segment]
    message_tokens: list[int]
    total: int


_new_tuple = tuple.__new__
_NOT_COUNTED = MessageCount(0, ())
"""What `counted_parts` gives a message outside the LLM context."""


def attribute(
    messages: Sequence[Mapping[str, Any]],
    entry_ids: Sequence[str | None],
    ledger: TokenLedger,
    previous: Attribution | None = None,
    copy: Callable[[Sequence[Any]], list[Any]] = list,
) -> Attribution:
    """Attribute every token of `messages` to a category and build their map segments.

    `entry_ids[i]` is the session entry that produced `messages[i]`. With `previous` (the
    attribution of the first `len(previous.message_tokens)` messages of the same list, same
    entry ids, same counter) only the messages after those are counted and `previous` is
    extended (a copy; `previous` itself is not modified): the result equals attributing the
    whole list, since segments never span two messages and totals are sums. O(new messages)
    plus list copies, made by `copy` (`list`, or copies prepared off the latency path:
    `ds4core.spare.Spares.copy`). Raises ValueError when `previous` covers more messages than
    given.
    """
    start = len(previous.message_tokens) if previous is not None else 0
    if start > len(messages):
        raise ValueError(f"previous attribution covers {start} messages, only {len(messages)} given")
    if previous is None:
        totals: dict[str, int] = {}
        children: dict[str, dict[str, int]] = {}
        segments: list[Segment] = []
        per_message: list[int] = []
        total = 0
    else:
        totals = dict(previous.totals)
        children = dict(previous.children)
        segments = copy(previous.segments)
        per_message = copy(previous.message_tokens)
        total = previous.total
    copied: set[str] = set()  # categories whose children dict is already this result's own
    # The loop runs once per context message (200,000 for a 50,000-turn session): `counted_parts`
    # inlined, parts unpacked as tuples, segments made by `_new_tuple` (what `Segment(...)`
    # runs, without the named tuple's Python-level `__new__`; issue 14).
    count_of = ledger.count
    known_ids = len(entry_ids)
    for index in range(start, len(messages)):
        message = messages[index]
        message_total, parts = count_of(message) if in_llm_context(message) else _NOT_COUNTED
        per_message.append(message_total)
        total += message_total
        entry_id = entry_ids[index] if index < known_ids else None
        last = segments[-1] if segments else None
        for category, child, tokens in parts:
            if tokens <= 0:
                continue
            totals[category] = totals.get(category, 0) + tokens
            if child is not None:
                kids = children.get(category)
                if kids is None:
                    kids = children[category] = {}
                    copied.add(category)
                elif category not in copied and previous is not None:
                    kids = children[category] = dict(kids)
                    copied.add(category)
                kids[child] = kids.get(child, 0) + tokens
            if last is not None and last[0] == category and last[2] == index:
                last = segments[-1] = _new_tuple(Segment, (category, last[1] + tokens, index, entry_id))
            else:
                last = _new_tuple(Segment, (category, tokens, index, entry_id))
                segments.append(last)
    return Attribution(ledger.counter.name, totals, children, segments, per_message, total)


def compose_breakdown(
    attribution: Attribution,
    *,
    context_window: int | None,
    provider_tokens: int | None = None,
    inferred_fixed_tokens: int | None = None,
    base: list[Segment] | None = None,
    table: CategoryTable = PI_TABLE,
    fixed: Sequence[tuple[Any, ...]] = (),
    reserved: Mapping[str, int] | None = None,
) -> Breakdown:
    """The `Breakdown` of an attribution: inferred system tokens first, then the messages'
    segments, then `unattributed`; rows and free space. See `breakdown` for the rules.
    O(segments) for the list copy plus O(children) for sorting them; no counting. The
    breakdown's `message_tokens` is the attribution's list itself (neither is ever changed).

    `table`: the rows' vocabulary (default Pi's): rows in its order, then any category it does
    not name ("Other: <id>"), never dropped. `fixed`: `(category, tokens, inferred[, child])`
    blocks that are no message (e.g. what a request's usage says it carried beyond its messages),
    drawn first, in that order; `child` names the block under its category's row. `reserved`: category → tokens of reserved
    space (`table.reserved` ids, e.g. an autocompact buffer): a row each, not in the estimate;
    free space = window − used − reserved.

    `base`: a list the caller gives away, equal to the first `len(base)` segments the
    breakdown will have (its inferred system prompt segment when there is one, then a prefix of
    the attribution's segments: e.g. a prepared copy of the previous breakdown's segments
    without their `unattributed`, after an append). The segments are then `base` extended by the
    rest, O(new segments), instead of a copy of all. Its ends are checked (the system prompt
    segment equal, its last segment the attribution's at that place); when they do not match,
    `base` is ignored."""
    totals = dict(attribution.totals)
    system = Segment("system_prompt", inferred_fixed_tokens, None, None) if inferred_fixed_tokens else None
    if system is not None:
        totals["system_prompt"] = totals.get("system_prompt", 0) + inferred_fixed_tokens  # type: ignore[operator]
    inferred_ids = {"system_prompt"} if inferred_fixed_tokens else set()
    head_segments = [system] if system is not None else []
    extra_children: dict[str, dict[str, int]] = {}
    for category, tokens, inferred, *named in fixed:
        if tokens > 0:
            head_segments.append(Segment(category, tokens, None, None))
            totals[category] = totals.get(category, 0) + tokens
            if inferred:
                inferred_ids.add(category)
            if named:
                kids = extra_children.setdefault(category, dict(attribution.children.get(category, {})))
                kids[named[0]] = kids.get(named[0], 0) + tokens
    head = len(head_segments)
    own = attribution.segments
    if base is not None and head <= len(base) <= head + len(own) and (
        base[:head] == head_segments
        and (len(base) == head or base[-1] is own[len(base) - head - 1])
        and (head or not base or base[0] is own[0])
    ):
        segments = base
        segments.extend(own[len(base) - head :])
    else:
        segments = head_segments
        segments.extend(own)
    estimate = sum(totals.values())
    unattributed = max((provider_tokens or 0) - estimate, 0)
    if unattributed:
        segments.append(Segment("unattributed", unattributed, None, None))
    used = provider_tokens if provider_tokens is not None else estimate
    held = {k: v for k, v in (reserved or {}).items() if v > 0}
    room = sum(held.values())
    free = max(context_window - used - room, 0) if context_window else None
    rows: list[CategoryRow] = []
    order = list(table.labels)
    order += [c for c in totals if c not in table.labels and c not in ("unattributed", "free")]
    order += [c for c in held if c not in order]
    for cat in order:
        if cat in ("unattributed", "free"):
            continue
        tokens = held.get(cat, 0) if cat in held else totals.get(cat, 0)
        if tokens <= 0:
            continue
        kids = sorted(extra_children.get(cat, attribution.children.get(cat, {})).items(), key=lambda kv: (-kv[1], kv[0]))
        inferred = cat in inferred_ids
        label = table.label(cat)
        if cat == "system_prompt" and inferred_fixed_tokens:
            label += " + tools (inferred)"
        rows.append(CategoryRow(cat, label, tokens, kids, inferred))
    if unattributed:
        rows.append(CategoryRow("unattributed", CATEGORIES["unattributed"], unattributed))
    if free is not None:
        rows.append(CategoryRow("free", table.labels.get("free", CATEGORIES["free"]), free))
    return Breakdown(
        attribution.counter, rows, segments, attribution.message_tokens, estimate, context_window, unattributed, free,
        table, room,
    )


def breakdown(
    messages: Sequence[Mapping[str, Any]],
    entry_ids: Sequence[str | None],
    ledger: TokenLedger,
    *,
    context_window: int | None,
    provider_tokens: int | None = None,
    inferred_fixed_tokens: int | None = None,
    excluded: Iterable[int] = (),
) -> Breakdown:
    """Attribute every token of `messages` to a category and build the map's segments.

    `entry_ids[i]` is the session entry that produced `messages[i]`. `provider_tokens` is the
    provider's count for the same context (when known): the positive difference to the estimate
    becomes `unattributed`. `inferred_fixed_tokens` (system prompt + tools inferred from the
    first reply's usage, when the session stores no system message) is charged to the system
    prompt row, marked inferred. Free space = window − the provider's count when known (it is
    the truth, even when our estimate is larger), else window − estimate.
    Equals `compose_breakdown(attribute(messages, entry_ids, ledger), ...)`; to extend it after
    an append, keep the `Attribution` and pass it to `attribute` as `previous`.
    """
    return compose_breakdown(
        attribute(messages, entry_ids, ledger),
        context_window=context_window,
        provider_tokens=provider_tokens,
        inferred_fixed_tokens=inferred_fixed_tokens,
    )


@dataclass(frozen=True, slots=True)  # (one per group / map cell: issue 32)
class Cell:
    """One pixel-map cell: its category and the entry (and message index) it belongs to."""

    category: str
    entry_id: str | None
    message_index: int | None


FREE_CELL = Cell("free", None, None)
"""The free-space cell (one object, shared by every layout)."""


def _largest_remainder(weights: Sequence[int], total: int) -> list[int]:
    """Integers proportional to `weights` that sum to exactly `total` (Hamilton's method:
    floors, then one more to the largest remainders; ties go to the earlier weight).
    Zero weights get zero. Raises ValueError when `total` < 0 or all weights are 0 and total > 0."""
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total}")
    whole = sum(weights)
    if whole <= 0:
        if total:
            raise ValueError("cannot share a positive total among zero weights")
        return [0] * len(weights)
    shares = [w * total // whole for w in weights]
    remainders = sorted(range(len(weights)), key=lambda i: (-(weights[i] * total % whole), i))
    for i in remainders[: total - sum(shares)]:
        shares[i] += 1
    return shares


def calibrate(totals: Mapping[str, int], target: int) -> dict[str, int]:
    """Scale estimated token counts so they sum to exactly `target` (tokens), in proportion.

    The provider's count for a request is the truth; our per-category estimate only says how it
    splits. Calibrating spreads the provider's total over the estimate's categories (largest
    remainder rounding, so the parts add up to `target` exactly and a zero stays zero). Example:
    `calibrate({"a": 300, "b": 100}, 200) == {"a": 150, "b": 50}`.
    Raises ValueError when `target` < 0, or when every total is 0 and `target` > 0.
    """
    keys = list(totals)
    return dict(zip(keys, _largest_remainder([max(totals[k], 0) for k in keys], target)))


@dataclass(frozen=True)
class Calibrated:
    """What every panel shows for one breakdown: one number per category.

    - `rows`: categories in `CATEGORIES` order (children scaled too), free space last; their
      tokens add up to `window` (or to `used` without a window); no `unattributed` row;
    - `segments`: the map's segments, scaled the same way (each category's segments share its
      row's tokens by largest remainder, so they sum to `used`); computed on first use
      (O(segments log segments)); the map itself lays out from `MapIndex` and the rows;
    - `used`: tokens in context: the provider's count when known, else the estimate, capped at
      the window; `free`: `window - used - reserved` (None without a window); reserved rows
      (`CategoryTable.reserved`, e.g. an autocompact buffer) are listed unscaled before free;
    - `estimate`: the raw estimate (`Breakdown.estimate`), `factor`: `used / estimate`
      (1.0 when nothing was scaled), `source`: "provider" or "estimate";
    - `capped`: the estimate exceeded the window and was scaled down to it.
    """

    rows: list[CategoryRow]
    used: int
    free: int | None
    window: int | None
    estimate: int
    factor: float
    source: str
    capped: bool = False
    breakdown: Breakdown | None = field(default=None, compare=False, repr=False)
    """The raw breakdown these numbers scale (its segments give `segments`)."""

    def percent(self, tokens: int) -> float:
        """`tokens` as a percentage of the window (of `used` without a window)."""
        base = self.window or self.used
        return 100.0 * tokens / base if base else 0.0

    @property
    def totals(self) -> dict[str, int]:
        """Category id → calibrated tokens (the rows without free space and the rows listed
        aside: they are not in the context)."""
        aside = self.breakdown.table.aside if self.breakdown is not None else ()
        return {r.id: r.tokens for r in self.rows if r.id != "free" and r.id not in aside}

    @property
    def segments(self) -> list[Segment]:
        """The breakdown's segments calibrated: within each category, its segments share the
        category's calibrated tokens by largest remainder (segments of 0 tokens dropped)."""
        cached = self.__dict__.get("_segments")
        if cached is not None:
            return cached
        out: list[Segment] = []
        if self.breakdown is not None:
            parts = [s for s in self.breakdown.segments if s.category not in ("unattributed", "free") and s.tokens > 0]
            totals = self.totals
            by_cat: dict[str, list[int]] = {}
            for i, s in enumerate(parts):
                by_cat.setdefault(s.category, []).append(i)
            scaled = [0] * len(parts)
            for cat, idx in by_cat.items():
                for i, t in zip(idx, _largest_remainder([parts[i].tokens for i in idx], totals.get(cat, 0))):
                    scaled[i] = t
            out = [Segment(s.category, t, s.message_index, s.entry_id) for s, t in zip(parts, scaled) if t > 0]
        object.__setattr__(self, "_segments", out)
        return out


def calibrated(breakdown: Breakdown, provider_tokens: int | None = None) -> Calibrated:
    """The breakdown scaled to the provider's count (`provider_tokens`, tokens; None: keep the
    estimate), never above the context window. The provider's count replaces the estimate as the
    total; each category gets its proportional share, rounded by largest remainder over the
    categories (`calibrate`: they add up to the total exactly); `unattributed` (the gap the
    estimate missed) is spread over the categories with the rest. Pure; O(categories +
    children): the per-segment figures (`Calibrated.segments`) are computed only when asked."""
    window = breakdown.context_window
    held, aside = breakdown.table.reserved, breakdown.table.aside
    raw = [r for r in breakdown.rows
           if r.id not in ("unattributed", "free") and r.id not in held and r.id not in aside and r.tokens > 0]
    kept = [r for r in breakdown.rows if r.id in held and r.tokens > 0]
    beside = [r for r in breakdown.rows if r.id in aside and r.tokens > 0]
    estimate = sum(r.tokens for r in raw)
    used = provider_tokens if provider_tokens is not None and estimate > 0 else estimate
    capped = bool(window) and used > window  # type: ignore[operator]
    if capped:
        used = window  # type: ignore[assignment]
    scaled = _largest_remainder([r.tokens for r in raw], used) if estimate else []
    rows: list[CategoryRow] = []
    for row, tokens in zip(raw, scaled):
        if tokens <= 0:
            continue
        kids = list(zip([n for n, _ in row.children], _largest_remainder([t for _, t in row.children], tokens))) if row.children and sum(t for _, t in row.children) else []
        kids = sorted(((n, t) for n, t in kids if t > 0), key=lambda kv: (-kv[1], kv[0]))
        rows.append(CategoryRow(row.id, row.label, tokens, kids, row.inferred))
    room = sum(r.tokens for r in kept)
    rows.extend(CategoryRow(r.id, r.label, r.tokens, list(r.children), r.inferred) for r in (*beside, *kept))
    free = max(window - used - room, 0) if window else None
    if free is not None:
        rows.append(CategoryRow("free", breakdown.table.labels.get("free", CATEGORIES["free"]), free))
    return Calibrated(
        rows=rows, used=used, free=free, window=window, estimate=estimate,
        factor=(used / estimate) if estimate else 1.0,
        source="provider" if provider_tokens is not None and estimate > 0 else "estimate", capped=capped,
        breakdown=breakdown,
    )


_SKIP = ("unattributed", "free")


class _IndexStore:
    """The append-only lists behind a chain of `MapIndex` extensions (see `MapIndex.of`).

    `cum` and `pos` are `array('q')`s (issue 32: a machine int per segment instead of two int
    objects) while every segment's tokens are an `int`; a segment with other tokens (a plug-in's
    float) turns them into lists (`ints` False), which read the same."""

    __slots__ = ("source", "cum", "pos", "cells", "ints", "picks")

    def __init__(self) -> None:
        self.source: list[Segment] = []
        self.cum: dict[str, MutableSequence[Any]] = {}  # category → running tokens after each of its segments
        self.pos: dict[str, MutableSequence[int]] = {}  # category → index into `cells` of each of its segments
        self.cells: list[Cell] = []
        # category → (its segments n, its cells q, the cells' indexes) of the last layout: the
        # store's lists are append-only, so the same (n, q) picks the same cells
        self.picks: dict[str, tuple[int, int, list[int]]] = {}
        self.ints = True

    def column(self) -> MutableSequence[Any]:
        """An empty `cum` / `pos` column."""
        return array("q") if self.ints else []

    def admit(self, segments: Sequence[Segment]) -> None:
        """Make the columns lists when a segment of `segments` has tokens that are not an int."""
        if self.ints and not all(type(seg.tokens) is int for seg in segments):
            self.ints = False
            self.cum = {cat: list(column) for cat, column in self.cum.items()}
            self.pos = {cat: list(column) for cat, column in self.pos.items()}


def _common_prefix(a: Sequence[Any], b: Sequence[Any], n: int) -> int:
    """How many leading items of `a` and `b` (of the first `n`) are equal: the same objects,
    found in C, or equal values (checked one by one, e.g. re-made fixed segments)."""
    i = 0
    while i < n:
        j = next(compress(count(i), map(is_not, islice(a, i, n), islice(b, i, n))), n)
        if j >= n or a[j] != b[j]:
            return j
        i = j + 1
    return n


def _truncated(store: _IndexStore, previous: "MapIndex", p: int, skip: tuple[str, ...], index: "MapIndex") -> _IndexStore:
    """A new store holding `previous`'s index of its first `p` segments (copies of the shared
    lists' prefixes; `previous` keeps its store), and `index` set to that prefix's counts.
    O(segments) in C slices plus O(segments after p) in Python."""
    dropped: dict[str, int] = {}
    cells_dropped = 0
    for seg in store.source[p:previous.n_source]:
        if seg.tokens > 0 and seg.category not in skip:
            dropped[seg.category] = dropped.get(seg.category, 0) + 1
            cells_dropped += 1
    out = _IndexStore()
    out.ints = store.ints
    out.source = store.source[:p]
    index.counts = {}
    for cat in previous.order:
        n = previous.counts[cat] - dropped.get(cat, 0)
        if n > 0:
            index.counts[cat] = n
            out.cum[cat] = store.cum[cat][:n]
            out.pos[cat] = store.pos[cat][:n]
    index.order = [cat for cat in previous.order if cat in index.counts]
    index.n_cells = previous.n_cells - cells_dropped
    out.cells = store.cells[:index.n_cells]
    return out


class MapIndex:
    """Running token totals of a breakdown's segments per category, in context order: what the
    pixel map needs to lay out `n` cells in O(n log segments) instead of O(segments).

    Built with `MapIndex.of(segments, previous)`: when `segments` extends the segments `previous`
    indexed (the usual append: the same objects, compared in C), only the new segments are
    indexed (O(new segments) plus a C-level prefix comparison); when they only share a prefix of
    at least half (an append that replaced the last message), from a copy of that prefix's index
    (C slices) plus the rest; otherwise from scratch.
    Segments of 0 tokens, `unattributed` and `free` are skipped. What an index shows never
    changes once built: an extension appends to lists it shares with its predecessor, and each
    index reads only its own prefix of them (its `counts`, `n_cells`), so a reader on another
    thread sees a consistent index while the next one is built."""

    __slots__ = ("_store", "n_source", "order", "counts", "n_cells")

    def __init__(self) -> None:
        self._store = _IndexStore()  # append-only lists, shared by the indexes of one growing context
        self.n_source = 0  # this index's prefix of `_store.source` (without a trailing unattributed/free)
        self.order: list[str] = []  # categories by first appearance
        self.counts: dict[str, int] = {}  # category → its indexed segments (a prefix of the store's lists)
        self.n_cells = 0  # this index's prefix of `_store.cells`

    @property
    def source(self) -> list[Segment]:
        """The indexed segments (a copy: O(n))."""
        return self._store.source[: self.n_source]

    @property
    def cells(self) -> list[Cell]:
        """One cell per indexed segment, in context order (a copy of the shared objects: O(n))."""
        return self._store.cells[: self.n_cells]

    @classmethod
    def of(
        cls,
        segments: Sequence[Segment],
        previous: "MapIndex | None" = None,
        skip: tuple[str, ...] = _SKIP,
        *,
        extends: bool = False,
    ) -> "MapIndex":
        """The index of `segments` (see the class), extending `previous` when it can (built with
        the same `skip`: categories left out, by default `unattributed` and `free`).

        The lists live in a store shared along a chain of extensions: when `previous` is the
        newest index of its store and `segments` extends its segments, the new segments are
        appended to the store in place (O(new segments), no copy) and `previous` keeps seeing
        its own prefix (its counts), so it stays valid and unchanged. Otherwise a new store.

        `extends=True`: the caller knows that `segments` starts with the segments `previous`
        indexed (e.g. `Snapshot.lineage` says so); then only the first and the last of them are
        compared (O(1)) instead of the whole prefix (O(segments), the cost of an append at
        40,000 messages). A wrong claim that those two checks catch falls back to the full
        comparison."""
        end = len(segments)
        while end and segments[end - 1].category in skip:
            end -= 1
        index = cls()
        start = 0
        if previous is not None:
            store, k = previous._store, previous.n_source
            if k <= end and len(store.source) == k and len(store.cells) == previous.n_cells \
                    and (k == 0 or segments[k - 1] is store.source[-1] or segments[k - 1] == store.source[-1]) \
                    and ((extends and (k == 0 or segments[0] is store.source[0] or segments[0] == store.source[0]))
                         or list(segments[:k]) == store.source):
                if k == end:
                    return previous  # nothing new to index
                start = k
                index._store = store
                index.order = list(previous.order)
                index.counts = dict(previous.counts)
                index.n_cells = previous.n_cells
            else:
                # the segments share a long prefix with `previous`'s (an append that replaced the
                # last message): copy that prefix of the store (C slices) and index the rest
                p = _common_prefix(segments, store.source, min(k, end))
                if p >= k // 2 and p > 0:
                    start = p
                    index._store = _truncated(store, previous, p, skip, index)
        store = index._store
        store.admit(segments[start:end])
        store.source.extend(segments[start:end])
        index.n_source = end
        cum_of, pos_of, cells = store.cum, store.pos, store.cells
        counts, order = index.counts, index.order
        for seg in segments[start:end]:
            if seg.tokens <= 0 or seg.category in skip:
                continue
            cat = seg.category
            n = counts.get(cat)
            if n is None:
                order.append(cat)
                n = 0
                cum_of[cat] = store.column()
                pos_of[cat] = store.column()
            cum = cum_of[cat]
            cum.append((cum[n - 1] if n else 0) + seg.tokens)
            pos_of[cat].append(len(cells))
            counts[cat] = n + 1
            cells.append(Cell(cat, seg.entry_id, seg.message_index))
        index.n_cells = len(cells)
        return index

    def totals(self) -> dict[str, int]:
        """Category → raw tokens of its indexed segments."""
        cum = self._store.cum
        return {cat: cum[cat][self.counts[cat] - 1] for cat in self.order}

    def layout(self, totals: Mapping[str, int], total_cells: int, tokens_per_cell: int) -> list[Cell]:
        """`total_cells` cells of `tokens_per_cell` tokens in context order (the rules of
        `map_cells`), each category drawn at its share of `totals` (category → tokens, e.g. the
        calibrated rows; `self.totals()` gives exactly `map_cells` of the segments). Within a
        category its cells go to its segments by running raw tokens. Cells are the index's own
        objects, so two layouts of the same index compare by identity."""
        if total_cells <= 0 or tokens_per_cell <= 0:
            return []
        order = [c for c in self.order if totals.get(c, 0) > 0]
        used = sum(totals[c] for c in order)
        if used <= 0:
            return [FREE_CELL] * total_cells
        filled = min(total_cells, max(1, (2 * used + tokens_per_cell) // (2 * tokens_per_cell)))
        quotas = _quotas(order, totals, filled, used)
        picks: list[int] = []
        memo = self._store.picks
        for cat in order:
            q = quotas[cat]
            if q <= 0:
                continue
            n = self.counts[cat]
            last = memo.get(cat)
            if last is not None and last[0] == n and last[1] == q:
                picks.extend(last[2])  # (an append changes one or two categories' cells)
                continue
            cum, pos = self._store.cum[cat], self._store.pos[cat]
            whole = cum[n - 1]
            two_q = 2 * q
            mine = [pos[bisect_left(cum, -(-(whole * (2 * j + 1)) // two_q), 0, n)] for j in range(q)]
            memo[cat] = (n, q, mine)
            picks.extend(mine)
        picks.sort()
        cells = self._store.cells
        out = [cells[g] for g in picks]
        out.extend([FREE_CELL] * (total_cells - len(out)))
        return out[:total_cells]


def _quotas(order: list[str], totals: Mapping[str, int], filled: int, used: int) -> dict[str, int]:
    """Cells per category (`map_cells`' rule): largest remainder of `filled` over the category
    totals, then at least one cell for each category with tokens while there are enough cells."""
    quotas = dict(zip(order, _largest_remainder([totals[c] for c in order], filled)))
    if filled >= len(order):  # every category with tokens shows at least one cell
        for cat in order:
            while quotas[cat] == 0:
                # the donor: the most over-served category that can spare a cell (a category
                # just given its one cell is over-served too, but has none to spare)
                donors = [c for c in order if quotas[c] > 1]
                if not donors:
                    break
                donor = max(donors, key=lambda c: (quotas[c] - totals[c] * filled / used, quotas[c]))
                quotas[donor] -= 1
                quotas[cat] += 1
    return quotas


def map_cells(segments: Sequence[Segment], total_cells: int, tokens_per_cell: int) -> list[Cell]:
    """Lay segments out as `total_cells` cells of `tokens_per_cell` tokens, in context order.

    Each category gets its share of cells: `round(category tokens / tokens_per_cell)` by largest
    remainder over all categories (so the filled cells are `round(used / tokens_per_cell)`),
    at least one cell for a category with any tokens (while there are as many cells as
    categories). Within a category, its cells go to its segments by cumulative tokens, so the
    cells follow context order and a segment smaller than half a cell may get none (its
    category's cells sit with its neighbours). The rest are free cells. Returns exactly
    `total_cells` cells (when the segments need more, they are scaled down to fit).
    Claude Code's `/context` grid draws categories the same way (one square per share).
    """
    if total_cells <= 0 or tokens_per_cell <= 0:
        return []
    index = MapIndex.of(segments, skip=())
    return index.layout(index.totals(), total_cells, tokens_per_cell)


SCALE_STEPS = (1, 2, 5)
"""Mantissas of the tokens-per-cell series (1-2-5: 1, 2, 5, 10, 20, 50, 100, 200, 500, …)."""


def tokens_per_cell(context_window: int, total_cells: int, keep: int | None = None) -> int:
    """Tokens one cell stands for: the smallest number of the 1-2-5 series (`SCALE_STEPS` × 10ⁿ)
    whose cells for the whole window fit in `total_cells`. With `keep` (the scale shown so far
    for the same window), `keep` is returned while it still fits, so the scale does not jump
    while a session grows or a panel above the map changes height."""
    window = max(context_window, 1)
    if total_cells <= 0:
        return window
    if keep and keep > 0 and -(-window // keep) <= total_cells:
        return keep
    step = 1
    while True:
        for m in SCALE_STEPS:
            if -(-window // (step * m)) <= total_cells:
                return step * m
        step *= 10
