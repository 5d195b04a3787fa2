"""Steering actions on a Pi session file: pin, collapse finished turns, undo a journaled write.

All writes go through `ds4sessions.steering.writer.append_entries` (append-only, checked, journaled) and
are Pi-native entries that Pi itself reads back:

- **pin**: a `label` entry on the target whose text starts `ds4:pin` (DS4 spec §5.1: a label
  matching `/^ds4:pin(\\s|$)/i`, last label per target wins). Labels resolve over the whole file
  (Pi session format §8), so a pin never changes the context and is allowed while an agent has
  the file open. An existing plain label is kept after the prefix (`ds4:pin <old label>`);
  unpinning writes back that text, or a cleared label (a label entry without `label`) when
  there is none.
- **collapse**: the last N finished turns become one `branch_summary` (Pi session format §5, 1.x
  semantics) whose parent is the entry before the oldest prompt of the span and whose `fromId` is
  the current leaf; it carries the collapsed assistant messages' usage summed and Pi's default
  `details` (`readFiles`, `modifiedFiles`). Being the last line, it is Pi's leaf on load: the
  context becomes everything before the span, then the summary.
- **undo**: a label write is undone by a label entry restoring the previous text; a collapse or
  compaction (which moved the branch) by a `custom` entry (`customType: "ds4tui.undo"`, never in
  context) whose parent is the leaf before that write, so Pi loads the old branch again. Refused
  when the conversation went on after the write (undoing would drop those messages).
  Undo is a stack (issue 30): an undo is a write like any other and can be undone (which redoes
  the write it undid: `in_force`), and a label write can be undone when every later label on
  its target is ds4tui's own and cancels out, so unwinding any mix of writes newest first
  always goes through.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ds4core.collapse import (
    CollapseCost,
    CollapseSummary,
    collapse_cost,
    summarize_span,
)
from ds4core.estimate import message_tokens
from ds4core.models import ModelInfo
from ds4core.planner import PIN_LABEL, is_pin_label

from ds4sessions.agents.pi.context import branch_path, build_context, convert_to_llm
from ds4sessions.agents.pi.entries import COMPACTION, LABEL, Entry
from ds4sessions.agents.pi.reader import PiSession
from ds4sessions.steering.writer import (
    CONTEXT_ENTRY_TYPES,
    Draft,
    Expected,
    FileState,
    Journal,
    JournalRecord,
    WriteRefused,
    WriteResult,
    agent_busy,
    append_entries,
    entries_after,
    read_state,
    serialize_entry,
)

PIN_PREFIX = "ds4:pin"
PIN_PATTERN = PIN_LABEL
"""DS4 spec §5.1: a label is a pin when, trimmed, it matches this (`ds4core.planner.PIN_LABEL`)."""
UNDO_CUSTOM_TYPE = "ds4tui.undo"


is_pin = is_pin_label
"""True when `label` (trimmed) is a DS4 pin label: the one pin rule, `ds4core.planner.is_pin_label`."""


@dataclass(frozen=True)
class Pin:
    """A resolved pin: `target_id`, its `label`, the target `entry` (None when missing from the
    file) and `on_branch` (the target is on the branch of the current leaf)."""

    target_id: str
    label: str
    entry: Entry | None
    on_branch: bool


def list_pins(session: PiSession) -> list[Pin]:
    """The pins of a session, in Pi's label order (labels resolved over the whole file, §8)."""
    on_branch = {e.id for e in branch_path(session)}
    return [
        Pin(target, label, session.by_id.get(target), target in on_branch)
        for target, label in session.labels.items()
        if is_pin(label)
    ]


def _label_draft(target_id: str, label: str | None) -> Draft:
    draft: Draft = {"type": LABEL, "targetId": target_id}
    if label:
        draft["label"] = label
    return draft


def _label_undo(target_id: str) -> Any:
    def undo(state: FileState, entries: list[dict[str, Any]]) -> dict[str, Any]:
        return {"kind": "label", "targetId": target_id, "label": state.session.labels.get(target_id)}

    return undo


def pin(
    path: str | Path,
    entry_id: str,
    *,
    clear: bool = False,
    note: str | None = None,
    expected: Expected | None = None,
    journal: Journal | None = None,
    force: bool = False,
    now: float | None = None,
) -> WriteResult:
    """Pin `entry_id` (append a `ds4:pin` label), or unpin it with `clear=True`.

    Pin text: `ds4:pin`, then `note` or the entry's existing plain label. Unpin: the text after
    `ds4:pin` as a plain label, or a cleared label. Allowed while another process has the file
    open (labels resolve over the whole file). Raises `WriteRefused` (`unknown_entry`;
    `nothing_to_do` when already pinned / not pinned; the writer's checks).
    """

    def build(state: FileState) -> list[Draft]:
        session = state.session
        if entry_id not in session.by_id:
            raise WriteRefused("unknown_entry", f"no entry {entry_id} in {state.path}")
        current = session.labels.get(entry_id)
        if clear:
            if not is_pin(current):
                raise WriteRefused("nothing_to_do", f"entry {entry_id} is not pinned")
            rest = (current or "").strip()[len(PIN_PREFIX) :].strip()
            return [_label_draft(entry_id, rest or None)]
        if is_pin(current):
            raise WriteRefused("nothing_to_do", f"entry {entry_id} is already pinned ({current})")
        suffix = note if note is not None else current
        return [_label_draft(entry_id, f"{PIN_PREFIX} {suffix.strip()}" if suffix and suffix.strip() else PIN_PREFIX)]

    return append_entries(
        path, build, action="unpin" if clear else "pin", expected=expected, journal=journal, force=force,
        undo=_label_undo(entry_id), now=now,
    )


def toggle_pin(path: str | Path, entry_id: str, **kwargs: Any) -> WriteResult:
    """Unpin `entry_id` when it is pinned, else pin it (keyword arguments as `pin`)."""
    pinned = is_pin(read_state(path).session.labels.get(entry_id))
    return pin(path, entry_id, clear=pinned, **kwargs)


# --------------------------------------------------------------------------------------------
# Collapse


@dataclass(frozen=True)
class CollapsePlan:
    """A collapse of the last `turns` finished turns, ready to append.

    - `available_turns`: how many turns could be collapsed (after the last compaction);
    - `anchor_id`: parent of the new `branch_summary` (the entry before the oldest prompt);
      `from_id`: the current leaf; `first_prompt_id`: the oldest prompt of the span;
    - `span_entry_ids`: the entries leaving the context (oldest prompt → leaf, on the branch);
    - `summary`: the deterministic summary; `cost`: tokens saved and prompt-cache cost
      (chars-v1 token estimates; USD from the model's prices, None without a model);
    - `pinned_in_span`: pinned entries that would leave the context;
    - `entry`: the `branch_summary` draft; `expected`: the file state it was planned on.
    """

    turns: int
    available_turns: int
    anchor_id: str
    from_id: str
    first_prompt_id: str
    span_entry_ids: tuple[str, ...]
    summary: CollapseSummary
    cost: CollapseCost
    pinned_in_span: tuple[str, ...]
    entry: Draft
    expected: Expected


def _prompt_positions(session: PiSession) -> tuple[list[tuple[int, str]], Any]:
    """(message index, entry id) of each prompt after the last compaction on the branch."""
    ctx = build_context(session)
    path = branch_path(session)
    position = {e.id: i for i, e in enumerate(path)}
    last_compaction = max((i for i, e in enumerate(path) if e.type == COMPACTION), default=-1)
    prompts = [
        (i, eid)
        for i, (m, eid) in enumerate(zip(ctx.messages, ctx.message_entry_ids))
        if m.get("role") == "user" and eid is not None and position.get(eid, -1) > last_compaction
    ]
    return prompts, ctx


def collapsible_turns(session: PiSession) -> int:
    """How many turns `plan_collapse` could collapse now (0 when the last turn is in flight)."""
    if agent_busy(session):
        return 0
    prompts, _ = _prompt_positions(session)
    if prompts and session.by_id[prompts[0][1]].parent_id is None:
        return len(prompts) - 1
    return len(prompts)


def turns_through(session: PiSession, entry_id: str) -> int | None:
    """How many of the last turns `plan_collapse` must take so that its span starts with the
    turn holding `entry_id` (its prompt or any entry after it on the branch): 1 for an entry of
    the last turn. None when the entry is not on the branch after the last compaction's first
    prompt (e.g. a compaction summary, an entry of another branch)."""
    prompts, _ = _prompt_positions(session)
    path = [e.id for e in branch_path(session)]
    position = {eid: i for i, eid in enumerate(path)}
    at = position.get(entry_id)
    if at is None or not prompts:
        return None
    starts = [position.get(eid, -1) for _, eid in prompts]
    k = max((i for i, p in enumerate(starts) if 0 <= p <= at), default=None)
    return None if k is None else len(prompts) - k


def _tokens(messages: list[dict[str, Any]]) -> int:
    return sum(message_tokens(m) for m in convert_to_llm(messages))


def plan_collapse(state: FileState, turns: int, model: ModelInfo | None = None) -> CollapsePlan:
    """Plan collapsing the last `turns` finished turns of the current branch (nothing written).

    Raises `WriteRefused("cannot_collapse", why)` when `turns` < 1, the last turn is still in
    flight, fewer turns exist after the last compaction, or nothing precedes the oldest prompt.
    """
    session = state.session
    if turns < 1:
        raise WriteRefused("cannot_collapse", "collapse at least one turn")
    busy = agent_busy(session)
    if busy:
        raise WriteRefused("cannot_collapse", f"the last turn is still in flight: {busy}")
    prompts, ctx = _prompt_positions(session)
    if turns > len(prompts):
        where = " after the last compaction" if any(e.type == COMPACTION for e in branch_path(session)) else ""
        raise WriteRefused("cannot_collapse", f"only {len(prompts)} turn(s) on this branch{where}; cannot collapse {turns}")
    start, first_prompt_id = prompts[-turns]
    first_prompt = session.by_id[first_prompt_id]
    if first_prompt.parent_id is None or first_prompt.parent_id not in session.by_id:
        raise WriteRefused(
            "cannot_collapse", f"nothing precedes the first prompt ({first_prompt_id}); the summary would have no anchor"
        )
    leaf = state.leaf_id
    assert leaf is not None
    path_ids = [e.id for e in branch_path(session)]
    span_ids = tuple(i for i in path_ids[path_ids.index(first_prompt_id) :] if i is not None)
    span = ctx.messages[start:]
    summary = summarize_span(span)
    summary_message = {"role": "branchSummary", "summary": summary.text, "fromId": leaf}
    cost = collapse_cost(
        _tokens(ctx.messages[:start]), _tokens(span), _tokens([summary_message]), model.pricing if model else None
    )
    entry: Draft = {
        "type": "branch_summary",
        "parentId": first_prompt.parent_id,
        "fromId": leaf,
        "summary": summary.text,
        "details": {"readFiles": list(summary.read_files), "modifiedFiles": list(summary.modified_files)},
    }
    if summary.usage:
        entry["usage"] = summary.usage
    pinned = tuple(i for i in span_ids if is_pin(session.labels.get(i)))
    return CollapsePlan(
        turns=turns, available_turns=collapsible_turns(session), anchor_id=first_prompt.parent_id, from_id=leaf,
        first_prompt_id=first_prompt_id, span_entry_ids=span_ids, summary=summary, cost=cost, pinned_in_span=pinned,
        entry=entry, expected=Expected(state.size, leaf),
    )


def collapse(
    path: str | Path,
    turns: int,
    *,
    expected: Expected | None = None,
    model: ModelInfo | None = None,
    journal: Journal | None = None,
    force: bool = False,
    now: float | None = None,
) -> WriteResult:
    """Append the `branch_summary` that collapses the last `turns` finished turns.

    The plan is rebuilt from the file as read under the write lock; `expected` (e.g.
    `CollapsePlan.expected` of the preview the user confirmed) makes a changed file refuse.
    Refused while another process has the file open unless `force`. Raises `WriteRefused`.
    """
    return append_entries(
        path, lambda state: [plan_collapse(state, turns, model).entry], action="collapse", expected=expected,
        refuse_when_open=True, force=force, journal=journal, undo=_leaf_undo, now=now,
    )


def check_record_intact(state: FileState, record: JournalRecord) -> None:
    """Raise `WriteRefused("not_undoable")` unless the bytes `record` wrote are still at its
    offset in the same file (same device and inode when the journal knows them; SHA-256 of the
    bytes, or the entries serialized again for old records)."""
    import hashlib
    import os

    path = state.path
    if record.status == "abandoned":
        raise WriteRefused("not_undoable", f"#{record.id} wrote nothing")
    st = os.stat(path)
    if record.ino is not None and (st.st_dev, st.st_ino) != (record.dev, record.ino):
        raise WriteRefused("not_undoable", f"{path} was replaced by another file since #{record.id}; nothing to undo there")
    with open(path, "rb") as f:
        f.seek(record.offset)
        data = f.read(record.length)
    wanted = record.sha256 or hashlib.sha256(b"".join(serialize_entry(e) for e in record.entries)).hexdigest()
    if len(data) != record.length or hashlib.sha256(data).hexdigest() != wanted:
        raise WriteRefused(
            "not_undoable",
            f"the bytes #{record.id} wrote are no longer at byte {record.offset} of {path} (the file was rewritten or "
            "replaced); undo refused",
        )


def in_force(journal: Journal, record: JournalRecord) -> bool:
    """True when `record`'s change is in force: it was not undone, or the record that undid it
    was itself undone (and so on: an undo of an undo redoes). Undo is a stack (issue 30)."""
    seen = {record.id}
    undone_by = record.undone_by
    in_effect = True
    while undone_by is not None:
        undoer = journal.get(undone_by)
        if undoer is None or undoer.id in seen or undoer.status != "done":
            break  # (a damaged chain: the mark stands)
        seen.add(undoer.id)
        in_effect = not in_effect
        undone_by = undoer.undone_by
    return in_effect if record.undone_by is not None else True


def _check_later_labels(state: FileState, record: JournalRecord, target: str, journal: Journal) -> None:
    """Refuse (`not_undoable`) to undo the label write `record` unless every later label entry on
    `target` is ds4tui's own and cancels out: a journaled write that is no longer in force
    (undone), or an undo in force. Then the target's label is the one `record` wrote, and the
    undo restores the one before it. A label from Pi or the user (not journaled), or a later
    relabel still in force, keeps the refusal (undo that one first: newest first, a stack)."""
    session = state.session
    written = record.entry_ids[-1]
    position = next((i for i, e in enumerate(session.entries) if e.id == written), None)
    later = [
        e for e in (session.entries[position + 1 :] if position is not None else ())
        if e.type == LABEL and e.raw.get("targetId") == target
    ]
    if not later:
        return
    ours = {entry_id: r for r in journal.list(state.path) if r.status == "done" for entry_id in r.entry_ids}
    for entry in later:
        other = ours.get(entry.id)
        if other is None:
            raise WriteRefused(
                "not_undoable",
                f"{target} was relabelled after #{record.id} (entry {entry.id}, line {entry.line_no}, not written by "
                "ds4tui); undoing would overwrite that label",
            )
        if in_force(journal, other) and other.undoes is None:
            raise WriteRefused(
                "not_undoable",
                f"{target} was relabelled after #{record.id} by #{other.id} ({other.action}); undo #{other.id} first",
            )
    wrote = record.entries[-1].get("label") if record.entries else None
    if session.labels.get(target) != wrote:
        raise WriteRefused(
            "not_undoable", f"{target}'s label is no longer the one #{record.id} wrote; undoing would overwrite it"
        )


def _leaf_undo(state: FileState, entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "leaf", "leafId": state.leaf_id}


# --------------------------------------------------------------------------------------------
# Undo


def undo(
    record_id: int,
    *,
    journal: Journal,
    expected: Expected | None = None,
    force: bool = False,
    now: float | None = None,
) -> WriteResult:
    """Undo journal record `record_id` by appending its counter-entry (see the module docstring).

    Raises `WriteRefused` (`not_undoable`: unknown record, a record that wrote nothing, one not
    in force (`in_force`: undone, by an undo still in force), no recipe, a label changed later by
    Pi, the user or a ds4tui write still in force (undo that one first), or the conversation
    continued after a branch-moving write; plus the writer's checks).
    """
    record = journal.get(record_id)
    if record is None:
        raise WriteRefused("not_undoable", f"no journal record #{record_id}")
    if record.status == "abandoned":
        why = f" ({record.note})" if record.note else ""
        raise WriteRefused("not_undoable", f"#{record_id} wrote nothing{why}; there is nothing to undo")
    if not in_force(journal, record):
        raise WriteRefused("not_undoable", f"#{record_id} was already undone by #{record.undone_by}")
    recipe = record.undo
    if recipe is None:
        raise WriteRefused("not_undoable", f"#{record_id} ({record.action}) cannot be undone")

    if recipe.get("kind") == "label":
        target = recipe.get("targetId")

        def build_label(state: FileState) -> list[Draft]:
            check_record_intact(state, record)
            _check_later_labels(state, record, str(target), journal)
            return [_label_draft(str(target), recipe.get("label"))]

        return append_entries(
            record.path, build_label, action="undo", expected=expected,
            journal=journal, force=force, undo=_label_undo(str(target)), undoes=record_id, now=now,
        )

    written = record.entry_ids[-1]

    def build(state: FileState) -> list[Draft]:
        check_record_intact(state, record)
        after = entries_after(state.session, written)
        if after is None:
            raise WriteRefused("not_undoable", f"{written} (#{record_id}) is no longer on the current branch")
        moved_on = [e.id for e in after if e.type in CONTEXT_ENTRY_TYPES]
        if moved_on:
            raise WriteRefused(
                "not_undoable",
                f"the conversation continued after {written} (#{record_id}): undoing would drop {len(moved_on)} message(s)",
            )
        return [
            {
                "type": "custom",
                "parentId": recipe["leafId"],
                "customType": UNDO_CUSTOM_TYPE,
                "data": {"undoes": written, "action": record.action, "journalId": record_id},
            }
        ]

    return append_entries(
        record.path, build, action="undo", expected=expected, refuse_when_open=True, journal=journal, force=force,
        undo=_leaf_undo, undoes=record_id, now=now,
    )
