"""The value the UI sees for one state of a session file, for every agent: `Snapshot`.

A live session (Pi's `ds4sessions.agents.pi.live.LiveSession`, or the generic
`ds4sessions.ingest.conversation.ConversationLive` that reads any agent's `SessionReader`) makes
one `Snapshot` per update; the derive pipeline, the view model, the widgets and the JSON
commands read only these, whatever the agent (issue 28: "Every agent through one seam").

What a snapshot's `session` and `context` offer, whatever the agent (duck-typed protocols):

- `SessionState`: `path`, `header` (dict or None), `status` ("session", "empty",
  "not_a_session"), `entries` (the entries kept: Pi keeps all, another agent none), `entry_count`
  (entries read), `by_id` (entry id →
  an entry with `id`, `type`, `role`, `line_no`, `message`, `raw`, `timestamp`), `labels`,
  `session_name`, `session_id`, `cwd`, `leaf_id`, `diagnostics` (`.total`, `.items`,
  `.summary()`), `last_line_no`, `identity` (one number per reader, for caches);
- `ContextState`: `messages` (Pi-shaped agent messages), `message_entry_ids`,
  `branch_entry_ids`, `context_entry_ids`, `labels`, `warnings` (`.kind`, `.message`), `model`
  (`{"provider", "modelId"}` or None), `leaf_id`.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from ds4core.categories import Breakdown
from ds4core.models import ModelInfo

from ds4sessions.agents import base


class AgentExtras(Protocol):
    """An agent's own facts that have no neutral home, as data the view model shows (issue 28:
    "per-agent vocabulary lives in the agent's package as data").

    - `header_note()`: a short item for the header (e.g. Codex "64% left", Claude Code
      "autocompact in 120k"), or None;
    - `legend_lines()`: lines under the category list (e.g. the autocompact point, Codex's rate
      limits), in the agent's words;
    - `problems()`: lines for Diagnostics beyond the reader's own (e.g. "context unknown after a
      compaction", opaque encrypted items);
    - `to_json()`: the same facts as JSON (JSON-safe values only).
    """

    def header_note(self) -> str | None: ...

    def legend_lines(self) -> list[str]: ...

    def problems(self) -> list[str]: ...

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of the context: a user message and everything until the next one.

    `index` is 1-based in context order (0 = messages before the first prompt, e.g. a
    compaction summary and kept replies); `time` is the prompt's local wall-clock time
    (None when unknown); `tokens` by the snapshot's preferred counter.
    """

    index: int
    time: dt.datetime | None
    prompt: str
    tool_calls: int
    tokens: int
    first_message: int
    last_message: int
    entry_ids: tuple[str, ...]


@dataclass(frozen=True)
class ProviderView:
    """The provider's numbers for the context (tokens), from the anchor reply's usage.

    - `prompt_tokens`: input + cacheRead + cacheWrite of the anchor request;
    - `context_tokens`: Pi's context size now = anchor total + estimate of later messages;
    - `estimate_at_anchor`: our estimate of what that request carried (fixed + earlier messages);
    - `ratio`: prompt_tokens / estimate_at_anchor (how far the estimator is from the provider);
    - `later_messages`: messages after the anchor, whose share is estimated.
    """

    anchor_index: int
    anchor_entry_id: str | None
    prompt_tokens: int
    context_tokens: int
    estimate_at_anchor: int
    ratio: float | None
    later_messages: int
    cache_read: int
    cache_write: int


@dataclass(frozen=True)
class Snapshot:
    """Everything the UI shows for one state of a session file, for any agent. A value: one per
    update, and nothing in it changes afterwards, whatever the ingest thread reads next.

    - `agent`: the agent id (`agents.base.AGENTS`: "pi", "claude-code", "codex", ...);
      `capabilities`: what ds4tui may offer for it (DS4 plan exact or what-if, retrieval,
      steering); `extras`: the agent's own facts behind one typed field (`AgentExtras`: Claude
      Code's /context rows and autocompact point, Codex's % left and rate limits; None for Pi,
      whose facts are its `session` and `context`);
    - `session`: the file's state as read (`SessionState`: for Pi a frozen `PiSession`,
      `PiSessionReader.freeze()`, whose `entries`/`by_id` see only the entries read before this
      snapshot; for another agent a `ds4sessions.ingest.conversation.ConversationSession`);
      `reader` is the same object (older name);
    - `context`: the messages the model sees (`ContextState`: Pi's `SessionContext`, or a
      `ConversationContext`), Pi-shaped agent messages (`agents.base` module doc); its lists are
      never mutated after it is made;
    - `conversation`: the agent-neutral `base.Conversation` (for Pi made on first use from the
      frozen data);
    - `model`/`model_key`, `breakdown` (the fast estimate) / `exact` (cl100k, after
      `refine`; for agents counted once, the same), `provider` (the provider's count), `turns`,
      `system_inferred`, `deleted`, `pending_bytes` and `file_size` (bytes read), `updated_at`
      (Unix seconds);
    - `unread_bytes`: bytes of the file not read yet (a first read in slices,
      `refresh(limit=...)`): the snapshot is the session as of byte `file_size`, a state it
      really had, not its current one; 0 once the read reached the end.

    `_lineage` is the live session's own: what the next append extends (not part of equality);
    `_conversation` the neutral conversation, or an object whose `conversation(snapshot)` makes it.
    """

    version: int
    path: Path
    session: Any
    context: Any
    model: ModelInfo | None
    model_key: str | None
    breakdown: Breakdown
    exact: Breakdown | None
    provider: ProviderView | None
    turns: tuple[Turn, ...]
    system_inferred: bool
    deleted: bool = False
    pending_bytes: int = 0
    file_size: int = 0
    unread_bytes: int = 0
    updated_at: float = field(default_factory=time.time)
    agent: str = base.PI
    capabilities: base.Capabilities = field(default_factory=base.Capabilities)
    extras: Any = None
    _lineage: Any = field(default=None, repr=False, compare=False)
    _conversation: Any = field(default=None, repr=False, compare=False)

    @property
    def reader(self) -> Any:
        """The frozen session (`session`; the name predates frozen snapshots)."""
        return self.session

    @cached_property
    def conversation(self) -> base.Conversation:
        """The agent-neutral state (`base.Conversation`) of this snapshot, made once on first use
        (Pi: O(messages + requests); every request is one assistant reply of the file, counted
        once)."""
        made = self._conversation
        if isinstance(made, base.Conversation):
            return made
        if made is None:
            return base.Conversation(self.agent, self.path, self.capabilities)
        return made.conversation(self)  # type: ignore[no-any-return]

    @property
    def best(self) -> Breakdown:
        """The exact (cl100k) breakdown when computed, else the fast chars-v1 one."""
        return self.exact or self.breakdown

    @property
    def lineage(self) -> tuple[int, str] | None:
        """`(epoch, counter of best)`, or None for a snapshot not made by a live session.

        Snapshots of one live session with equal epochs descend by appends from one full
        rebuild (each extends the newest before it, never a sibling), so for an earlier snapshot
        `a` and a later `b` of one epoch: `b.context`'s message lists start with `a`'s, the same
        objects. With equal lineages (the same counter too), `b.turns` start with `a.turns` but its
        last (an append only changes the last turn), the same objects, and `b.best.segments` with
        `a.best.segments` up to its last message segment (the same objects, but for leading
        inferred blocks, equal when both have them; a trailing `unattributed` differs). What lets
        the view model extend the previous one in O(new) instead of comparing prefixes (issue 10)."""
        lineage = self._lineage
        if lineage is None or lineage.context is not self.context:
            return None
        return lineage.epoch, self.best.counter

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens, when the model is known."""
        return self.model.context_window if self.model else None

    @property
    def problems(self) -> list[str]:
        """Every problem worth a user's attention, one line each: the reader's diagnostics (with
        line numbers), a torn last line, the context builder's warnings, and what the agent's
        extras add (`AgentExtras.problems`)."""
        lines: list[str] = []
        summary = self.session.diagnostics.summary()
        if summary != "no problems":
            lines += summary.splitlines()
        lines += [f"{w.kind}: {w.message}" for w in self.context.warnings]
        if self.extras is not None:
            lines += list(self.extras.problems())
        return lines
