"""The agent-neutral session model: what every agent plug-in (Pi, Claude Code, Codex) produces.

Everything downstream of an agent's reader (counting, the derive pipeline, the view model, the
overview, `usage` roll-ups, the JSON commands) reads only these values, and asks the agent's
`Capabilities` before it offers DS4 planning, retrieval or steering.

Shapes
------
- `Conversation`: one frozen state of one session file. `messages` is the branch the model saw
  (after the last compaction), as *Pi-shaped agent messages*: plain dicts with `role` in
  {"system", "user", "assistant", "toolResult", "compactionSummary", "branchSummary", "custom",
  "bashExecution"} and Pi's content blocks (`text`, `thinking`, `toolCall`, `image`), because the
  pure engine (`ds4core.categories`, the estimators, DS4's planner) counts that shape. A reader
  converts its agent's rows into it and records, per message, the neutral `MessageMeta` (entry
  id, category override, tool name, opaque flag). Agent messages are never mutated after the
  `Conversation` is made.
- `Request`: one model request, counted once (streamed rows, repeats, re-emits and fork replays
  already folded by the reader), with its `Usage` split into disjoint buckets, in tokens.
- `Compaction`: a point where the context was replaced by a summary.
- `SessionInfo`: one discovered session file (cheap: no full parse).

Units: tokens are ints; times are Unix epoch *seconds* as floats (None when unknown); sizes in
bytes; costs in USD.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from ds4sessions.ingest.diagnostics import Diagnostic

#: Agent ids, as they appear in every `--json` output's `"agent"` field.
PI = "pi"
CLAUDE_CODE = "claude-code"
CODEX = "codex"
AGENTS = (PI, CLAUDE_CODE, CODEX)


def listed(value: Any) -> list[Any] | tuple[()]:
    """`value` when it is a JSON array (a list), else `()`: how a reader walks an array field of
    a row it parsed, whose type the agent (or a damaged file) may have got wrong, without a
    `TypeError` on a number, a bool or null (bad-inputs: "a field of the wrong type")."""
    return value if isinstance(value, list) else ()


def mapped(value: Any) -> Mapping[str, Any]:
    """`value` when it is a JSON object (a mapping), else `{}`: `listed`'s twin for an object
    field (a `compactMetadata` that is a number must not raise `AttributeError`)."""
    # (`type(...) is dict` first: `isinstance` against `typing.Mapping` costs ~1.5 µs)
    return value if type(value) is dict or isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What ds4tui may offer for an agent's sessions.

    - `ds4_plan`: DS4's deterministic planner (manifest, explain, cache-aware decision) applies;
    - `ds4_exact`: the plan is DS4's own decision for this session (Pi, where the
      ds4-context-engine extension runs: matched exactly); False with `ds4_plan` set: a what-if,
      "what DS4 would send" for an agent that builds its own context (Claude Code, Codex);
    - `retrieval`: DS4's historical retrieval applies (a what-if writes no index to disk);
    - `steering`: pin / collapse / compaction writes are possible (Pi only: the session file is
      append-only for us, and only Pi's);
    - `bridge`: the ds4tui bridge extension can run inside the agent;
    - `cache_ttl_recorded`: the transcript records the prompt-cache TTL (Anthropic 5m/1h writes);
      when False a countdown is shown only for a known or configured retention, labelled
      "typical, not recorded";
    - `read_only_reason`: one line saying why steering is not offered (shown to the user).
    """

    ds4_plan: bool = False
    ds4_exact: bool = False
    retrieval: bool = False
    steering: bool = False
    bridge: bool = False
    cache_ttl_recorded: bool = False
    read_only_reason: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    """One request's token usage in disjoint buckets (tokens).

    `input` is the uncached input, `cache_read` the tokens read from the prompt cache,
    `cache_write` those written to it (`cache_write_5m` + `cache_write_1h` when the agent records
    the TTL split; both 0 when it does not), `output` the generated tokens and `reasoning` the
    part of `output` spent on reasoning (0 when unknown; it is *inside* `output`, never added).
    Readers normalise agents whose buckets nest (OpenAI: cached ⊂ input) into this disjoint form.
    """

    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    reasoning: int = 0

    @property
    def prompt_tokens(self) -> int:
        """What the request carried into the model: input + cache read + cache write."""
        return self.input + self.cache_read + self.cache_write

    @property
    def cache_read_share(self) -> float | None:
        """cache_read / prompt_tokens, None for an empty prompt."""
        total = self.prompt_tokens
        return self.cache_read / total if total else None


@dataclass(frozen=True)
class Price:
    """A model's price as an agent's own table gives it: `cost_of(usage)` in USD for one
    request's `Usage`, and `source`, a short label naming the table and its date (e.g.
    "Anthropic pricing page, checked 2026-11-29"). An agent plug-in's `price(model)` returns one
    (or None), tried before the bundled model table (`ds4sessions.overview.prices.PriceBook`)."""

    source: str
    cost_of: Callable[[Usage], float]

    def cost(self, usage: Usage) -> float:
        """USD of one request's usage."""
        return self.cost_of(usage)


LineDiagnostic = Diagnostic
"""One counted problem of a line-based reader (Codex, Gemini CLI): `ingest.diagnostics.Diagnostic`
with a `kind` of the reader's own (a string such as "unknown_row_type", or a `Problem`), shown
quoted and escaped as Pi's are."""


@dataclass(frozen=True, slots=True)
class Request:
    """One model request, counted once.

    - `index`: 0-based position among the session's requests (file order after folding);
    - `entry_id`: the reply's entry id (Pi id, Claude uuid of the first streamed row, Codex
      synthetic `turn:<n>` ids), None when the agent records none;
    - `timestamp`: Unix seconds of the request (when the agent records only the reply, the reply);
    - `model`, `provider`: as recorded;
    - `message_index`: how many of `Conversation.messages` precede the reply (so
      `messages[:message_index]` is what the request carried), None when the request is not on
      the current context (before a compaction, or on a side chain);
    - `sidechain`: a subagent's or side-chain request (excluded from the main context anchor);
    - `synthetic`: a row that is not a real provider reply (`<synthetic>`, API errors); it never
      sets the context anchor or the cache countdown;
    - `cost_usd`: the cost the agent recorded, None when it records none;
    - `miss_reason`: the cache-miss cause the agent itself recorded (Claude Code's
      `message.diagnostics.cache_miss_reason.type`), None when not recorded;
    - `billed`: a `synthetic` request that is still a real, billed provider request (Codex's
      remote compaction call): never the context anchor, but in the prompt cache's history and
      its cost, as `cache --json` lists it.
    """

    index: int
    usage: Usage
    entry_id: str | None = None
    timestamp: float | None = None
    model: str | None = None
    provider: str | None = None
    message_index: int | None = None
    sidechain: bool = False
    synthetic: bool = False
    cost_usd: float | None = None
    miss_reason: str | None = None
    billed: bool = False


@dataclass(frozen=True, slots=True)
class Compaction:
    """A point where the context was replaced by a summary.

    `kind` is "manual" | "auto" | "remote" | "micro" (a microcompaction that only cleared tool
    results); `opaque` is True when the summary is encrypted and cannot be shown or counted
    exactly (Codex remote compaction); `tokens_before` is the context the agent reported before it,
    when recorded.
    """

    entry_id: str | None
    timestamp: float | None
    kind: str = "manual"
    tokens_before: int | None = None
    opaque: bool = False


@dataclass(frozen=True, slots=True)
class MessageMeta:
    """Neutral facts about one message of `Conversation.messages` (same index).

    `category` overrides the category `ds4core.categories` would give the whole message (e.g.
    Claude Code's "memory_files", "skills", "attachments"), None to keep the default; `tool` is
    the tool name of a tool call/result; `opaque` marks content the agent stored encrypted (counted
    from its size, labelled opaque); `source` is a short agent-specific label shown in the inspector
    (e.g. "attachment:file", "reasoning.summary").
    """

    entry_id: str | None
    category: str | None = None
    tool: str | None = None
    opaque: bool = False
    source: str | None = None


@dataclass(frozen=True)
class Conversation:
    """One frozen state of one session file, agent-neutral. Never mutated; a new one per update.

    - `agent`: one of `AGENTS`; `path`: the file; `session_id`, `title`, `cwd` as recorded;
    - `model`, `provider`, `context_window` (tokens; None when unknown);
    - `messages` / `meta`: the context the model saw now, Pi-shaped (see module doc), same length;
      tuples or lists that the reader never changes once handed out (`messages`, `meta` and
      `requests` alike: a reader may build them from copies made ahead, `ds4core.spare`);
    - `requests`: every request of the file once, in order (side chains included, flagged);
    - `compactions`: on the current branch, oldest first;
    - `leaf_id`: the current leaf entry id; `entries`: entries read;
    - `diagnostics`: counted problems (the reader's `Diagnostic` values), shown to the user;
    - `parent`: the parent session id (fork, subagent), None for a root session;
    - `extra`: agent-specific facts that have no neutral home yet (e.g. Codex rate limits,
      Claude Code's autocompact settings), JSON-safe values only;
    - `stable`: how many leading `messages` (and `meta`) are the very objects of the previous
      conversation the same reader made (0: none, or not known); a live session then counts
      only what follows (an append changes the tail: O(new) instead of O(messages)).
    """

    agent: str
    path: Path
    capabilities: Capabilities
    messages: Sequence[Mapping[str, Any]] = ()
    meta: Sequence[MessageMeta] = ()
    requests: Sequence[Request] = ()
    compactions: tuple[Compaction, ...] = ()
    session_id: str | None = None
    title: str | None = None
    cwd: str | None = None
    model: str | None = None
    provider: str | None = None
    context_window: int | None = None
    leaf_id: str | None = None
    entries: int = 0
    diagnostics: tuple[Any, ...] = ()
    parent: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    stable: int = 0

    @property
    def last_request(self) -> Request | None:
        """The last real main-chain request (not synthetic, not a side chain), or None."""
        for request in reversed(self.requests):
            if not request.synthetic and not request.sidechain:
                return request
        return None


class MessageMemo:
    """Per-message values of one live session's successive conversations, each computed once
    per message object: `values(conv)` keeps the values of the first `conv.stable` messages
    (checked to be the same objects at both ends, else all are computed again) and computes the
    rest with `fn(message, meta)`. An append then costs O(new messages) (issue 28).

    `values` returns the memo's own list (valid until the next call: copy it to keep it, e.g.
    `list(memo.values(conv))`, a C-level copy). Not thread-safe: one live session's worker."""

    def __init__(self, fn: Callable[[Mapping[str, Any], "MessageMeta"], Any]) -> None:
        self.fn = fn
        self._objects: list[Any] = []
        self._values: list[Any] = []
        self.kept = 0  # how many values the last call kept

    def values(self, conv: "Conversation") -> list[Any]:
        """One value per message of `conv` (see the class)."""
        messages, metas = conv.messages, conv.meta
        keep = min(conv.stable, len(self._objects), len(messages))
        if keep and (messages[0] is not self._objects[0] or messages[keep - 1] is not self._objects[keep - 1]):
            keep = 0
        del self._objects[keep:], self._values[keep:]
        fn = self.fn
        for i in range(keep, len(messages)):
            self._objects.append(messages[i])
            self._values.append(fn(messages[i], metas[i]))
        self.kept = keep
        return self._values


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One discovered session file, listed without a full parse.

    `modified` in Unix seconds, `size` in bytes; `live` is True when the agent's own liveness
    record names it (pid alive), or, failing that, when it was modified recently; `parent` links a
    fork or subagent to its parent session id.
    """

    agent: str
    path: Path
    session_id: str | None
    modified: float
    size: int
    project: str | None = None
    title: str | None = None
    live: bool = False
    parent: str | None = None
    model: str | None = None


class SessionReader(Protocol):
    """An incremental reader of one session file (one per file, driven by one thread).

    `feed(lines)` takes complete lines as `(line_no, byte_offset, raw_bytes)` (1-based line
    numbers; the tailer holds a torn tail back) and never raises for bad content: problems become
    counted diagnostics. `conversation()` returns the frozen state after everything fed so far.
    """

    def feed(self, lines: Sequence[tuple[int, int, bytes]]) -> None: ...

    def conversation(self) -> Conversation: ...


class Agent(Protocol):
    """An agent plug-in: `name` (one of `AGENTS`), `capabilities`, discovery, file recognition, a
    reader factory."""

    name: str
    capabilities: Capabilities

    def discover(self) -> list[SessionInfo]:
        """Every session file of this agent on this machine, newest first (cheap listing)."""
        ...

    def recognizes(self, head: bytes) -> bool:
        """True when `head` (the first ≤ 64 KiB of a file) looks like this agent's session file."""
        ...

    def reader(self, path: Path) -> SessionReader:
        """A fresh incremental reader for `path`."""
        ...
