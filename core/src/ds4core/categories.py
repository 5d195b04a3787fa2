"""What fills the context window, by category, and the pixel map's cells.

Categories follow the `/context` panel of the pi-context extension: system prompt, tools, user
messages, assistant text, thinking, tool calls, tool results (children per tool name), bash
executions, compaction summary, branch summaries, custom messages (children per custom type),
plus `unattributed` (provider total − estimate, when positive) and free space.

Messages are Pi agent messages (plain dicts, as `buildSessionContext` returns them). The text a
part contributes is what Pi's `convertToLlm()` sends (Pi session format §7): a bash execution
becomes "Ran `cmd`" plus its fenced output, summaries get their fixed preambles; messages that
`convertToLlm` drops (`excludeFromContext` bash runs, unknown roles) contribute nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Iterable, Sequence

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
    "bash": "Bash executions",
    "compaction": "Compaction summary",
    "branch_summary": "Branch summaries",
    "custom": "Custom messages",
    "other": "Other",
    "unattributed": "Unattributed",
    "free": "Free space",
}

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


def _content_parts(content: Any, category: str, child: str | None) -> list[Part]:
    if isinstance(content, str):
        return [(category, child, content)]
    parts: list[Part] = []
    for block in content or ():
        if type(block) is not dict and not isinstance(block, Mapping):
            parts.append((category, child, js_stringify(block)))
        elif block.get("type") == "image":
            parts.append((category, child, block))
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
        for tool in message.get("toolsAdded") or ():
            if isinstance(tool, Mapping):
                parts.append(("tools", str(tool.get("name", "?")), js_stringify(tool)))
        return parts or [("system_prompt", None, "")]
    if role == "user":
        return _content_parts(message.get("content"), "user", None)
    if role == "assistant":
        parts = []
        for block in message.get("content") or ():
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


@dataclass(frozen=True)
class Segment:
    """A run of tokens on the map: one message part (or a synthetic block such as inferred
    system tokens), in context order. `message_index` and `entry_id` name its source."""

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


def attribute(
    messages: Sequence[Mapping[str, Any]],
    entry_ids: Sequence[str | None],
    ledger: TokenLedger,
    previous: Attribution | None = None,
) -> Attribution:
    """Attribute every token of `messages` to a category and build their map segments.

    `entry_ids[i]` is the session entry that produced `messages[i]`. With `previous` (the
    attribution of the first `len(previous.message_tokens)` messages of the same list, same
    entry ids, same counter) only the messages after those are counted and `previous` is
    extended (a copy; `previous` itself is not modified): the result equals attributing the
    whole list, since segments never span two messages and totals are sums. O(new messages)
    plus list copies. Raises ValueError when `previous` covers more messages than given.
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
        segments = list(previous.segments)
        per_message = list(previous.message_tokens)
        total = previous.total
    copied: set[str] = set()  # categories whose children dict is already this result's own
    for index in range(start, len(messages)):
        count = counted_parts(ledger, messages[index])
        per_message.append(count.total)
        total += count.total
        entry_id = entry_ids[index] if index < len(entry_ids) else None
        last = segments[-1] if segments else None
        for part in count.parts:
            if part.tokens <= 0:
                continue
            totals[part.category] = totals.get(part.category, 0) + part.tokens
            if part.child is not None:
                kids = children.get(part.category)
                if kids is None:
                    kids = children[part.category] = {}
                    copied.add(part.category)
                elif part.category not in copied and previous is not None:
                    kids = children[part.category] = dict(kids)
                    copied.add(part.category)
                kids[part.child] = kids.get(part.child, 0) + part.tokens
            if last is not None and last.category == part.category and last.message_index == index:
                last = segments[-1] = Segment(part.category, last.tokens + part.tokens, index, entry_id)
            else:
                last = Segment(part.category, part.tokens, index, entry_id)
                segments.append(last)
    return Attribution(ledger.counter.name, totals, children, segments, per_message, total)


def compose_breakdown(
    attribution: Attribution,
    *,
    context_window: int | None,
    provider_tokens: int | None = None,
    inferred_fixed_tokens: int | None = None,
) -> Breakdown:
    """The `Breakdown` of an attribution: inferred system tokens first, then the messages'
    segments, then `unattributed`; rows and free space. See `breakdown` for the rules.
    O(segments) for the list copy plus O(children) for sorting them; no counting."""
    totals = dict(attribution.totals)
    segments: list[Segment] = []
    if inferred_fixed_tokens:
        segments.append(Segment("system_prompt", inferred_fixed_tokens, None, None))
        totals["system_prompt"] = totals.get("system_prompt", 0) + inferred_fixed_tokens
    segments.extend(attribution.segments)
    estimate = sum(totals.values())
    unattributed = max((provider_tokens or 0) - estimate, 0)
    if unattributed:
        segments.append(Segment("unattributed", unattributed, None, None))
    used = provider_tokens if provider_tokens is not None else estimate
    free = max(context_window - used, 0) if context_window else None
    rows: list[CategoryRow] = []
    for cat, label in CATEGORIES.items():
        if cat == "unattributed":
            tokens = unattributed
        elif cat == "free":
            tokens = free or 0
        else:
            tokens = totals.get(cat, 0)
        if tokens <= 0 and cat != "free":
            continue
        if cat == "free" and free is None:
            continue
        kids = sorted(attribution.children.get(cat, {}).items(), key=lambda kv: (-kv[1], kv[0]))
        inferred = cat == "system_prompt" and bool(inferred_fixed_tokens)
        rows.append(CategoryRow(cat, label + (" + tools (inferred)" if inferred else ""), tokens, kids, inferred))
    return Breakdown(
        attribution.counter, rows, segments, list(attribution.message_tokens), estimate, context_window, unattributed, free
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


@dataclass(frozen=True)
class Cell:
    """One pixel-map cell: its category and the entry (and message index) it belongs to."""

    category: str
    entry_id: str | None
    message_index: int | None


def map_cells(segments: Sequence[Segment], total_cells: int, tokens_per_cell: int) -> list[Cell]:
    """Lay segments out as `total_cells` cells of `tokens_per_cell` tokens, in context order.

    Cell boundaries follow cumulative token positions, so a segment gets about
    `tokens / tokens_per_cell` cells; every message with tokens gets at least one cell
    (entry resolution) while the window has room; the rest are free cells.
    Returns exactly `total_cells` cells (the map never overflows: when entries outnumber cells,
    the last cells are shared and show the last entries' category).
    """
    if total_cells <= 0 or tokens_per_cell <= 0:
        return []
    cells: list[Cell] = []
    position = 0
    for seg in segments:
        start_cell = position // tokens_per_cell
        position += seg.tokens
        end_cell = -(-position // tokens_per_cell)  # ceil
        want = max(end_cell - max(start_cell, len(cells)), 0)
        if want == 0 and (not cells or cells[-1].message_index != seg.message_index or seg.message_index is None):
            want = 1
        for _ in range(want):
            if len(cells) >= total_cells:
                break
            cells.append(Cell(seg.category, seg.entry_id, seg.message_index))
    free = Cell("free", None, None)
    cells.extend([free] * (total_cells - len(cells)))
    return cells


def tokens_per_cell(context_window: int, total_cells: int) -> int:
    """The smallest "round" number of tokens per cell (1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10ⁿ,
    integers only) that fits the window in `total_cells` cells."""
    if total_cells <= 0:
        return max(context_window, 1)
    need = max(-(-context_window // total_cells), 1)
    step = 1
    while True:
        for m in (1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8):
            value = step * m
            if value >= need and value == int(value):
                return int(value)
        step *= 10
