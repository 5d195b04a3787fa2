"""Claude Code's `/context` terms, autocompact point and prompt-cache TTL, as pure arithmetic.

Nothing here reads a file: the Claude Code plug-in (`ds4sessions.agents.claude`) measures the
transcript and hands the numbers in. Units: tokens (int), seconds (float).

Sources of the rules (cited per function):
- `/context` categories and ids: Claude Code 2.1.197's own `/context` output for the shared
  sample (`sessions-claude/af1a7763-….claude-context.md`): System prompt, System tools, Skills,
  Messages, Free space; "Free space = window − sum of categories" (same file, and MAIN:65).
- How 2.1.197 computes them (its bundled `analyzeContextUsage`, read in the npm package
  `@anthropic-ai/claude-code-linux-x64@2.1.197`; the same in the published TypeScript of
  `src/utils/analyzeContext.ts`): System prompt and the tool definitions by `count_tokens`;
  Skills = Σ over skills of rough(`- name: description`) (the lines of the `skill_listing`
  attachment); **System tools = tool definitions − Skills**; **Messages = the last reply's
  `input + cache_creation + cache_read` − (System prompt + System tools + MCP tools + Custom
  agents + Memory files + Skills) + rough(messages after that reply)**, i.e. the remainder of the
  provider's count; the messages after the reply go through `normalizeMessagesForAPI` first
  (minified `Cua` → `Zv(Ak(…))`), so `isMeta` caveats and `system/local_command` output (a user
  message, `<local-command-stdout>` wrapper included) count; rough(text) = round(len / b) with b = 4 for the model families in
  `ROUGH_4_FAMILIES`, else 3. The "Autocompact buffer" row and its share of the window appear only
  when the window was set by `CLAUDE_CODE_AUTO_COMPACT_WINDOW` (or settings / server data), not
  for the model's own window (source "auto"), which is why the sample's Free space is 180.1k.
- Autocompact: threshold = effective window − 13,000, and `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE` can
  only lower it (`min(floor(effective × pct/100), effective − 13,000)`: anthropics/claude-code
  #31806); effective window = window − min(max output, 20,000) reserved for the summary, and
  `CLAUDE_CODE_AUTO_COMPACT_WINDOW` = `min(model window, clamp(env, 100k, 1M))`
  (BaseInfinity/claude-sdlc-harness #520, decompiled 2.1.221; jojoprison/mnemo v1.2.16: "Claude
  Code compacts at window − min(max_output, 20000) − 13000"); `DISABLE_AUTO_COMPACT` /
  `DISABLE_COMPACT` turn it off (anthropics/claude-code #64773 lists them). Checked on the
  generator's auto-compaction run (100k window, 30 %): trigger 24,000.
- Prompt-cache TTL: 5 minutes by default, 1 hour when written with `ttl: "1h"`; each read
  refreshes it (Anthropic prompt-caching docs); both tiers in one write → the 5 min part expires
  first (docs/claude-code-format.md §3).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ds4core.jsjson import utf16_len

#: Claude Code's `/context` category ids, in its display order, with its labels.
CLAUDE_CATEGORIES: dict[str, str] = {
    "system_prompt": "System prompt",
    "system_tools": "System tools",
    "mcp_tools": "MCP tools",
    "mcp_tools_deferred": "MCP tools (deferred)",
    "system_tools_deferred": "System tools (deferred)",
    "custom_agents": "Custom agents",
    "memory_files": "Memory files",
    "skills": "Skills",
    "messages": "Messages",
    "free_space": "Free space",
    "autocompact_buffer": "Autocompact buffer",
}

#: Children of `messages` (ours, finer than Claude Code's), display order and labels.
MESSAGE_CHILDREN: dict[str, str] = {
    "user": "User messages",
    "assistant_text": "Assistant text",
    "thinking": "Thinking",
    "tool_calls": "Tool calls",
    "tool_results": "Tool results",
    "attachments": "Attachments",
    "compaction": "Compaction summary",
}

DEFAULT_WINDOW = 200_000
"""Claude Code's default context window (tokens); `[1m]` model ids get `WINDOW_1M`."""
WINDOW_1M = 1_000_000
AUTOCOMPACT_MARGIN = 13_000
"""Tokens kept free below the effective window (anthropics/claude-code #31806)."""
SUMMARY_OUTPUT_RESERVE = 20_000
"""Tokens reserved for the compaction summary's output (min(max output, 20,000); #520)."""
WINDOW_ENV_MIN = 100_000
WINDOW_ENV_MAX = 1_000_000

SYSTEM_PROMPT_SHARE = 1.5 / 16.2
"""Share of the inferred system prompt + tool definitions (Skills already taken out) given to the
system prompt, as the transcript gives no finer structure: Claude Code 2.1.197's `/context` on
the shared sample (System prompt 1.5k, System tools 14.7k). An inference, labelled as such."""

ROUGH_4_FAMILIES = frozenset({
    "claude-3-opus", "claude-3-sonnet", "claude-3-haiku", "claude-3-5-sonnet", "claude-3-5-haiku",
    "claude-3-7-sonnet", "claude-opus-4-0", "claude-opus-4-1", "claude-opus-4-5", "claude-opus-4-6",
    "claude-sonnet-4-0", "claude-sonnet-4-5", "claude-sonnet-4-6", "claude-haiku-4-5"})
"""Model families whose rough estimate is 4 characters per token in Claude Code 2.1.197 (its
bundled set, read from the npm package); every other model (e.g. `claude-opus-4-8`) gets 3."""

FIVE_MINUTES = 300.0
ONE_HOUR = 3600.0


def chars_tokens(text: str) -> int:
    """Tokens of `text` by the common Anthropic rule of thumb, ceil(chars / 4) (0 for "")."""
    return math.ceil(len(text) / 4) if text else 0


def rough_chars_per_token(model: str | None) -> int:
    """Characters per token of Claude Code 2.1.197's rough estimate for `model`: 4 for a model id
    that starts with a family of `ROUGH_4_FAMILIES` (a date or `[1m]` suffix allowed; `.`/`_` read
    as `-`), 3 otherwise, 4 when the model is unknown (Claude Code's default)."""
    if not model:
        return 4
    name = model.lower().split("[", 1)[0].replace(".", "-").replace("_", "-")
    return 4 if any(name == f or name.startswith(f + "-") for f in ROUGH_4_FAMILIES) else 3


def rough_tokens(text: str, chars_per_token: int = 4) -> int:
    """Claude Code's rough token estimate of `text`: round(len / chars_per_token), halves up
    (JavaScript `Math.round`); 0 for "". Length in UTF-16 code units, as JavaScript counts."""
    if not text:
        return 0
    return math.floor(utf16_len(text) / chars_per_token + 0.5)


def skill_listing_tokens(listing: str, chars_per_token: int) -> list[tuple[str, int]]:
    """(skill name, tokens) of a `skill_listing` attachment's content, as `/context`'s Skills
    table counts them: one entry per `- name: description` item (an item runs until the next line
    that starts a new `- name:` item; descriptions may span lines), rough(item) each. Source:
    Claude Code 2.1.197 `analyzeContextUsage` (skills counted as rough(`- ${name}: ${desc}`),
    the very lines it writes into the listing); the shared sample's 13 skills give 1,480 tokens,
    its `/context` says 1.5k and lists each within Claude Code's display rounding (~160, ~240…)."""
    items: list[list[str]] = []
    for line in listing.split("\n"):
        if line.startswith("- ") and (": " in line or line[2:].strip() and " " not in line[2:].strip()):
            name = line[2:].split(": ", 1)[0]
            if name and " " not in name:
                items.append([line])
                continue
        if items:
            items[-1].append(line)
    out = []
    for item in items:
        text = "\n".join(item).rstrip("\n")
        out.append((item[0][2:].split(": ", 1)[0], rough_tokens(text, chars_per_token)))
    return out


def model_window(model: str | None, version: str | None = None) -> int:
    """Context window (tokens) of a Claude model id in a transcript of Claude Code `version`:
    `ds4core.agent_models.claude_window` (1,000,000 for a `[1m]` suffix; 200,000 up to Claude Code
    2.1.197; else the model's LiteLLM window; else 200,000 assumed, which that function labels)."""
    from ds4core.agent_models import claude_window

    return claude_window(model, version).tokens


@dataclass(frozen=True, slots=True)
class Autocompact:
    """Where Claude Code compacts by itself.

    `window`: the context window used (tokens, after `CLAUDE_CODE_AUTO_COMPACT_WINDOW`);
    `effective`: window − the summary reserve; `threshold`: the context size that triggers an
    auto-compaction; `buffer`: window − (effective − 13,000), Claude Code's "Autocompact buffer" (the percentage
    override moves the trigger, not the buffer `/context` shows: the generator's run with a 100k
    window and 30 % printed "Autocompact buffer 33k", tests/fixtures/claude/autocompact-diagnostics.claude-context.md);
    `enabled`: False under `DISABLE_AUTO_COMPACT`/`DISABLE_COMPACT`; `overrides`: the environment
    variables that changed the result (name → value as given).
    """

    window: int
    effective: int
    threshold: int
    buffer: int
    enabled: bool = True
    overrides: Mapping[str, str] = field(default_factory=dict)

    def tokens_until(self, context_tokens: int) -> int | None:
        """Tokens left before auto-compaction triggers (≥ 0), None when it is disabled."""
        if not self.enabled:
            return None
        return max(self.threshold - context_tokens, 0)

    def to_json(self) -> dict[str, object]:
        """JSON-safe form (camelCase keys)."""
        return {"window": self.window, "effectiveWindow": self.effective, "threshold": self.threshold,
                "buffer": self.buffer, "enabled": self.enabled, "overrides": dict(self.overrides)}


def _env_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = float(value.replace("_", "").strip())
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number > 0 else None


def autocompact(model_window_tokens: int, env: Mapping[str, str], max_output: int | None = None) -> Autocompact:
    """Claude Code's auto-compaction point for a model window and an environment.

    `model_window_tokens`: the model's window; `env`: environment variables (only
    `CLAUDE_CODE_AUTO_COMPACT_WINDOW`, `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`, `DISABLE_AUTO_COMPACT`,
    `DISABLE_COMPACT` are read; unparsable values are ignored); `max_output`: the model's max output
    tokens when known (the reserve is min(max_output, 20,000)). Rules and sources: module doc.
    """
    overrides: dict[str, str] = {}
    window = model_window_tokens
    raw_window = env.get("CLAUDE_CODE_AUTO_COMPACT_WINDOW")
    env_window = _env_int(raw_window)
    if env_window is not None:
        window = min(model_window_tokens, min(max(env_window, WINDOW_ENV_MIN), WINDOW_ENV_MAX))
        overrides["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = str(raw_window)
    reserve = SUMMARY_OUTPUT_RESERVE if max_output is None else min(max_output, SUMMARY_OUTPUT_RESERVE)
    effective = max(window - reserve, 0)
    threshold = max(effective - AUTOCOMPACT_MARGIN, 0)
    default_threshold = threshold
    raw_pct = env.get("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE")
    if raw_pct is not None:
        try:
            pct = float(raw_pct)
        except ValueError:
            pct = math.nan
        if 0 < pct <= 100:
            threshold = min(math.floor(effective * pct / 100), threshold)
            overrides["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"] = str(raw_pct)
    enabled = True
    for name in ("DISABLE_AUTO_COMPACT", "DISABLE_COMPACT"):
        value = env.get(name)
        if value and value.strip().lower() not in ("0", "false", "no", ""):
            enabled = False
            overrides[name] = value
    return Autocompact(window=window, effective=effective, threshold=threshold,
                       buffer=window - default_threshold, enabled=enabled, overrides=overrides)


@dataclass(frozen=True, slots=True)
class Term:
    """One `/context` category: Claude Code's `id` and `label`, `tokens`, whether the number is
    `inferred` (not measured in the transcript), a one-line `note`, and finer `children`."""

    id: str
    label: str
    tokens: int
    inferred: bool = False
    note: str = ""
    children: tuple["Term", ...] = ()
    deferred: bool = False

    def to_json(self) -> dict[str, object]:
        """JSON-safe form; `deferred: true` marks a row `/context` lists but does not count in the
        total or take from Free space (tools loaded on demand through ToolSearch)."""
        out: dict[str, object] = {"id": self.id, "label": self.label, "tokens": self.tokens, "inferred": self.inferred}
        if self.deferred:
            out["deferred"] = True
        if self.note:
            out["note"] = self.note
        if self.children:
            out["children"] = [c.to_json() for c in self.children]
        return out


@dataclass(frozen=True, slots=True)
class ContextTerms:
    """Claude Code's `/context`, our way.

    `total`: the context now (input + cache write + cache read of the last real main-chain reply;
    None when no reply since the last compaction, then `estimated_total` is used); `window`;
    `terms`: categories in `CLAUDE_CATEGORIES` order (zero ones kept, so shapes stay fixed);
    `estimated_total`: the sum of the non-free categories.
    """

    total: int | None
    window: int
    terms: tuple[Term, ...]
    estimated_total: int

    def term(self, term_id: str) -> Term:
        """The category with id `term_id`. Raises KeyError when absent."""
        for term in self.terms:
            if term.id == term_id:
                return term
        raise KeyError(term_id)


def fixed_part(anchor_prompt_tokens: int, anchor_message_tokens: int) -> int:
    """The system prompt + tool definitions of a request, inferred: its prompt tokens minus what
    the transcript's messages account for (never negative). Claude Code does not log them
    (docs/claude-code-format.md §6.5)."""
    return max(anchor_prompt_tokens - anchor_message_tokens, 0)


def context_terms(
    *,
    total: int | None,
    window: int,
    fixed: int | None,
    message_children: Mapping[str, int],
    skills: int = 0,
    custom_agents: int = 0,
    memory_files: int = 0,
    mcp_tools: int = 0,
    child_tools: Mapping[str, Sequence[tuple[str, int]]] | None = None,
    buffer: int = 0,
    skill_items: Sequence[tuple[str, int]] = (),
    fixed_note: str | None = None,
    messages_note: str = "",
) -> ContextTerms:
    """Compose Claude Code's `/context` categories (tokens), by Claude Code 2.1.197's rules
    (module doc).

    `fixed`: the inferred system prompt + tool definitions (None when no request anchors it). As
    in `/context`, Skills are taken out of it (System tools = tool definitions − Skills, at most
    `fixed`), the rest is split by `SYSTEM_PROMPT_SHARE`, and `mcp_tools` come out of the tools.
    `message_children`: tokens per `MESSAGE_CHILDREN` id; Messages is their sum (the caller makes
    them add up to the measured remainder). `custom_agents`/`memory_files`: tokens of those
    listings, already out of the children. `skills`: the Skills row (`skill_items` its per-skill
    children). `child_tools`: per message child, (name, tokens) grandchildren. `buffer`: the
    "Autocompact buffer" row (0 when `/context` would not show one). Free space = window − every
    other row, floored at 0. `estimated_total`: the sum of the rows above Free space, which is
    `fixed` + agents + memory + Messages (Skills are inside `fixed` when it is known).
    """
    fixed_tokens = fixed or 0
    skills_in_fixed = min(skills, fixed_tokens) if fixed is not None else 0
    rest = fixed_tokens - skills_in_fixed
    system_prompt = round(rest * SYSTEM_PROMPT_SHARE)
    tools_all = rest - system_prompt
    system_tools = max(tools_all - mcp_tools, 0)
    mcp = tools_all - system_tools
    note = fixed_note or ("inferred: first request after the start/compaction minus its messages" if fixed is not None
                          else "unknown: no request yet")
    children = []
    for cid, label in MESSAGE_CHILDREN.items():
        grand = tuple(Term(f"{cid}:{name}", name, tok) for name, tok in (child_tools or {}).get(cid, ()))
        children.append(Term(cid, label, int(message_children.get(cid, 0)), children=grand))
    messages = sum(c.tokens for c in children)
    skills_row = skills_in_fixed if fixed is not None else skills
    used = system_prompt + system_tools + mcp + custom_agents + memory_files + skills_row + messages
    free = max(window - used - buffer, 0)
    skill_children = tuple(Term(f"skills:{name}", name, tok) for name, tok in skill_items)
    terms = (
        Term("system_prompt", CLAUDE_CATEGORIES["system_prompt"], system_prompt, inferred=True, note=note),
        Term("system_tools", CLAUDE_CATEGORIES["system_tools"], system_tools, inferred=True, note=note),
        Term("mcp_tools", CLAUDE_CATEGORIES["mcp_tools"], mcp),
        Term("mcp_tools_deferred", CLAUDE_CATEGORIES["mcp_tools_deferred"], 0, deferred=True),
        Term("system_tools_deferred", CLAUDE_CATEGORIES["system_tools_deferred"], 0, deferred=True),
        Term("custom_agents", CLAUDE_CATEGORIES["custom_agents"], custom_agents),
        Term("memory_files", CLAUDE_CATEGORIES["memory_files"], memory_files),
        Term("skills", CLAUDE_CATEGORIES["skills"], skills_row, children=skill_children),
        Term("messages", CLAUDE_CATEGORIES["messages"], messages, note=messages_note, children=tuple(children)),
        Term("free_space", CLAUDE_CATEGORIES["free_space"], free),
        Term("autocompact_buffer", CLAUDE_CATEGORIES["autocompact_buffer"], buffer),
    )
    return ContextTerms(total=total, window=window, terms=terms, estimated_total=used)


COUNT_TOOLS_OVERHEAD = 500
"""Tokens Claude Code 2.1.337 takes off a `count_tokens` answer for tools it counts on their own
(MCP tools, each deferred built-in tool): the request's tool-use preamble (cli.js, minified `goe =
500` in `xKs`/`FKs`); the tools sent with every request (`System tools`) keep it."""

_PROBE = [{"role": "user", "content": "foo"}]


def count_tokens_estimate(text: str | None = None, tool_chars: Sequence[int] = ()) -> int:
    """ds4tui's estimate of a `count_tokens` answer, as Claude Code 2.1.337's `/context` asks it:
    one text as a user message and no tools (a system prompt section, a memory file, a custom
    agent's "type whenToUse"), or the probe message "foo" with tools whose definitions' JSON have
    `tool_chars` characters. The estimate is chars/4 of the request's JSON `[system, tools,
    messages]`, floored: exact against the agent-oracle fake (`count_tokens` = that formula),
    within Anthropic's tokenizer's usual ~10 % of real text otherwise. Tokens."""
    if text is not None:
        return len(json.dumps([None, [], [{"role": "user", "content": text}]])) // 4
    if not tool_chars:
        return len(json.dumps([None, [], _PROBE])) // 4
    return (len(json.dumps([None, [], _PROBE])) + sum(tool_chars) + 2 * (len(tool_chars) - 1)) // 4


def recorded_context_terms(
    *,
    total: int | None,
    window: int,
    system_prompt: int,
    tools: int,
    skills: int,
    mcp_tools: int,
    mcp_deferred: int,
    system_deferred: int,
    custom_agents: int,
    memory_files: int,
    message_children: Mapping[str, int],
    child_tools: Mapping[str, Sequence[tuple[str, int]]] | None = None,
    buffer: int = 0,
    skill_items: Sequence[tuple[str, int]] = (),
    notes: Mapping[str, str] | None = None,
) -> ContextTerms:
    """Claude Code 2.1.337's `/context` rows from what its transcript records (tokens).

    Claude Code 2.1.337 cli.js, minified `w6r` (analyzeContextUsage): System prompt = Σ count of
    each system-prompt section (`MKs`; the sections are the `prompt_snapshot` attachment's); System
    tools = count of the tools sent − Skills (`Ji = nr − Sr`); MCP tools = the loaded MCP tools'
    share of max(0, count − 500) (`FKs`); System tools (deferred) = Σ max(0, count(tool) − 500)
    over the deferred built-ins (`xKs`), listed but **not** counted (`isDeferred`); Custom agents
    (`BKs`), Memory files (`IKs`) counted per item; Skills = the listing's rough estimate (`wJs`);
    Messages = the last reply's usage − the counted rows + the rough estimate after it (`us`);
    Free space = window − counted rows − the buffer. `tools` is the count of the tools sent (before
    Skills come out); `message_children` must add up to Messages (the caller calibrates)."""
    notes = dict(notes or {})
    system_tools = max(tools - skills, 0)
    children = []
    for cid, label in MESSAGE_CHILDREN.items():
        grand = tuple(Term(f"{cid}:{name}", name, tok) for name, tok in (child_tools or {}).get(cid, ()))
        children.append(Term(cid, label, int(message_children.get(cid, 0)), children=grand))
    messages = sum(c.tokens for c in children)
    used = system_prompt + system_tools + mcp_tools + custom_agents + memory_files + skills + messages
    free = max(window - used - buffer, 0)
    skill_children = tuple(Term(f"skills:{name}", name, tok) for name, tok in skill_items)
    terms = (
        Term("system_prompt", CLAUDE_CATEGORIES["system_prompt"], system_prompt, note=notes.get("system_prompt", "")),
        Term("system_tools", CLAUDE_CATEGORIES["system_tools"], system_tools, note=notes.get("system_tools", "")),
        Term("mcp_tools", CLAUDE_CATEGORIES["mcp_tools"], mcp_tools, note=notes.get("mcp_tools", "")),
        Term("mcp_tools_deferred", CLAUDE_CATEGORIES["mcp_tools_deferred"], mcp_deferred, deferred=True,
             note=notes.get("mcp_tools_deferred", "")),
        Term("system_tools_deferred", CLAUDE_CATEGORIES["system_tools_deferred"], system_deferred, deferred=True,
             inferred=True, note=notes.get("system_tools_deferred", "")),
        Term("custom_agents", CLAUDE_CATEGORIES["custom_agents"], custom_agents),
        Term("memory_files", CLAUDE_CATEGORIES["memory_files"], memory_files),
        Term("skills", CLAUDE_CATEGORIES["skills"], skills, children=skill_children),
        Term("messages", CLAUDE_CATEGORIES["messages"], messages, note=notes.get("messages", ""), children=tuple(children)),
        Term("free_space", CLAUDE_CATEGORIES["free_space"], free),
        Term("autocompact_buffer", CLAUDE_CATEGORIES["autocompact_buffer"], buffer),
    )
    return ContextTerms(total=total, window=window, terms=terms, estimated_total=used)


def predicted_after_compaction(fixed: int | None, summary_tokens: int, kept_tokens: int = 0) -> int | None:
    """Predicted context after a compaction: the fixed part + the summary + kept messages
    (Claude Code's `postTokens` counts messages only: docs/claude-code-format.md §5). None when
    the fixed part is unknown."""
    if fixed is None:
        return None
    return fixed + summary_tokens + kept_tokens


@dataclass(frozen=True, slots=True)
class CacheTtl:
    """The prompt cache's time left after the last request.

    `tier`: "5m" | "1h" | None (no write yet); `anchor`: the last request's time (s);
    `expires_at`: when the first part of the cached prefix expires (s), None when unknown;
    `expires_1h_at`: when the 1 h part expires, when there is one.
    """

    tier: str | None
    anchor: float | None
    expires_at: float | None
    expires_1h_at: float | None = None

    def remaining(self, now: float) -> float | None:
        """Seconds left before `expires_at` at `now` (0 when past), None when unknown."""
        return None if self.expires_at is None else max(self.expires_at - now, 0.0)


def cache_ttl(anchor: float | None, write_5m: int, write_1h: int, tier_before: str | None = None) -> CacheTtl:
    """TTL after the last request at `anchor` (s): the tier comes from the latest write (`write_5m`,
    `write_1h` tokens of the last request that wrote; `tier_before` when the last request only read,
    since a read refreshes the same tier). Both tiers → the 5 min part expires first."""
    if anchor is None:
        return CacheTtl(None, None, None)
    if write_5m > 0:
        return CacheTtl("5m", anchor, anchor + FIVE_MINUTES, anchor + ONE_HOUR if write_1h > 0 else None)
    if write_1h > 0:
        return CacheTtl("1h", anchor, anchor + ONE_HOUR, anchor + ONE_HOUR)
    if tier_before == "1h":
        return CacheTtl("1h", anchor, anchor + ONE_HOUR, anchor + ONE_HOUR)
    if tier_before == "5m":
        return CacheTtl("5m", anchor, anchor + FIVE_MINUTES)
    return CacheTtl(None, anchor, None)


MISS_CAUSES = ("ttl_lapse", "compaction", "model_changed", "prefix_changed")
"""Inferred cache-miss causes, in the order they are tested."""


def infer_miss_cause(*, gap_seconds: float | None, ttl_seconds: float | None, compaction_between: bool,
                     model_changed: bool) -> str:
    """Why a request read nothing from a cache that had been written, when Claude Code recorded
    no `cache_miss_reason`: "compaction" (a compaction since the previous request), "ttl_lapse"
    (the gap exceeds the previous write's TTL), "model_changed", else "prefix_changed" (something
    before the cached prefix's end changed). docs/claude-code-format.md §3."""
    if compaction_between:
        return "compaction"
    if gap_seconds is not None and ttl_seconds is not None and gap_seconds > ttl_seconds:
        return "ttl_lapse"
    if model_changed:
        return "model_changed"
    return "prefix_changed"
