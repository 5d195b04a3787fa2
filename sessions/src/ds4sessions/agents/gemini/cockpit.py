"""Gemini CLI on the one dashboard (issue 34): its categories, its own context count and
compression threshold, and a prompt cache whose lifetime the API does not report.

- The rows: `categories.GEMINI_TABLE`, the messages counted with cl100k by `gemini_parts`; the
  system instruction and the tool declarations are not in the file: together they are the first
  request's prompt (on the current context) minus the estimate of the messages it carried
  (`agents.plugin.inferred_fixed`, as for Pi sessions without a system message), split in the
  proportions Gemini CLI sent them in ds4tui's oracle run (`models.request_shape`: per tool
  declaration), every row marked inferred.
- The provider's count: the last request's `tokens.input` (promptTokenCount), the number Gemini CLI
  itself keeps (`GeminiChat.getLastPromptTokenCount`), shows as "% used" and compares with its
  compression threshold; the rows are calibrated to it. When the last request is not on the
  current context (a rewind or a compression since), there is no provider count: the estimate.
- Thoughts: listed aside with the thought tokens Gemini reported for the replies in the context
  (billed as output, never sent again).
- The compression threshold (chatCompressionService.ts: compress when the last prompt reaches
  `model.compressionThreshold` × `tokenLimit(model)`, default 0.5): the room past it is a reserved
  row, drawn after the context as Claude Code's autocompact buffer is; the header says how far.
- The cache: every request once, priced from `gemini-models.json`; no countdown (Gemini's implicit
  cache reports no lifetime); a miss after a rewind or a compression says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ds4core.models import ModelTable

from ds4sessions.agents.base import Conversation
from ds4sessions.agents.gemini import models
from ds4sessions.agents.gemini.categories import GEMINI_TABLE, gemini_parts


def _fmt(tokens: int) -> str:
    from ds4core.tokens import fmt_tokens

    return fmt_tokens(tokens)


@dataclass(frozen=True)
class GeminiExtras:
    """Gemini CLI's own facts for the screen (`ingest.snapshot.AgentExtras`): its context count,
    the compression threshold, thoughts, compressions and rewinds (`extra`: the reader's
    `Conversation.extra`), how the fixed part was inferred (`fixed`) and the window (`window`)."""

    extra: Mapping[str, Any] = field(repr=False)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    window: int | None = None

    def header_note(self) -> str | None:
        """"compression in 512.1k", "compression due" (past the threshold), or None."""
        until = (self.extra.get("compression") or {}).get("tokensUntil")
        if until is None:
            return None
        return f"compression in {_fmt(until)}" if until > 0 else "compression due"

    def legend_lines(self) -> list[str]:
        """The context count, the threshold, thoughts, compressions, rewinds: Gemini CLI's words."""
        extra, lines = self.extra, []
        context = extra.get("contextTokens")
        if context is not None and extra.get("contextAnchored"):
            share = f" ({100 * context / self.window:.1f}% used)" if self.window else ""
            lines.append(f"context {context:,}{share}: the last request's prompt, Gemini CLI's own count")
        elif context is not None:
            lines.append(f"no request since the history changed: the last prompt ({context:,}) is not this context")
        c = extra.get("compression") or {}
        if c.get("threshold") is not None:
            where = f"compression at {c['fraction']:g} × {self.window or 0:,} = {c['threshold']:,}"
            until = c.get("tokensUntil")
            lines.append(where + (f": {_fmt(until)} to go" if until is not None and until > 0 else
                                  ": reached, Gemini CLI compresses at its next check" if until is not None else ""))
            lines.append(f"threshold from {c.get('source')}")
        if extra.get("thoughtsTokens"):
            lines.append(f"thoughts {extra['thoughtsTokens']:,} (billed as output, not sent again)")
        if extra.get("compressions"):
            lines.append(f"compressed {extra['compressions']}× (<state_snapshot>)")
        if extra.get("rewinds"):
            lines.append(f"rewound {extra['rewinds']}× (/rewind)")
        if self.fixed.get("tokens"):
            lines.append(f"system instruction + tool declarations {self.fixed['tokens']:,} inferred ({self.fixed['note']})")
        return lines

    def problems(self) -> list[str]:
        """What the reader's diagnostics do not say: screen messages the CLI recorded (errors),
        tool-use prompt tokens outside the context count."""
        lines = []
        screen = self.extra.get("screenMessages") or {}
        if isinstance(screen, Mapping) and screen.get("error"):
            lines.append(f"Gemini CLI recorded {screen['error']} error message(s) in this session")
        if self.extra.get("toolUsePromptTokens"):
            lines.append(f"{self.extra['toolUsePromptTokens']:,} tool-use prompt tokens (toolUsePromptTokenCount) "
                         "are not in the context count or the cost")
        return lines

    def to_json(self) -> dict[str, Any]:
        """`contextTokens`, `contextSource`, `compression`, `thoughtsTokens`, `compressions`,
        `rewinds`, `snapshots`, `fixedInferred`, `windowSource`."""
        out = {k: self.extra.get(k) for k in ("contextTokens", "contextSource", "compression", "thoughtsTokens",
                                             "compressions", "rewinds", "snapshots", "windowSource")}
        out["fixedInferred"] = dict(self.fixed) or None
        return out


def split_fixed(total: int, kind: str) -> tuple[list[tuple[Any, ...]], str]:
    """The inferred fixed part (`total` tokens) as `compose_breakdown` blocks: the system
    instruction, then one tool declaration block per tool (child: its name), in the proportions
    of `models.request_shape(kind)`; one "system instruction" block without a shape. Returns
    (blocks, a note on the source)."""
    from ds4core.categories import calibrate

    shape = models.request_shape(kind) or models.request_shape("main")
    if not shape:
        return [("system_instruction", total, True)], "the first request's prompt minus its messages"
    tools = {str(k): int(v) for k, v in (shape.get("toolDeclarations") or {}).items() if isinstance(v, int) and v > 0}
    system = int(shape.get("systemInstructionChars") or 0)
    if not system + sum(tools.values()):
        return [("system_instruction", total, True)], "the first request's prompt minus its messages"
    shares = calibrate({"": system, **tools}, total)  # ("": the system instruction; tool names are never empty)
    blocks: list[tuple[Any, ...]] = [("system_instruction", shares.pop(""), True)]
    blocks += [("tool_declarations", t, True, name) for name, t in shares.items() if t > 0]
    note = (f"the first request's prompt minus its messages, split as Gemini CLI {models.shape_version() or '?'} "
            f"sent them ({kind})")
    return blocks, note


def account(conv: Conversation, memo: dict[str, Any], models_table: ModelTable | None = None) -> Any:
    """The dashboard's accounting of a Gemini CLI conversation (module doc): an
    `ingest.conversation.Accounting`."""
    from ds4core.categories import CategoryRow, attribute, compose_breakdown
    from ds4core.tokens import Cl100kCounter, TokenLedger

    from ds4sessions.agents.plugin import inferred_fixed, provider_view
    from ds4sessions.ingest.conversation import Accounting, model_info

    counter = memo.get("counter")
    if counter is None:
        counter = memo["counter"] = Cl100kCounter()
    ledger = memo.get("ledger")
    if ledger is None or len(getattr(ledger, "_by_identity", ())) > 2 * max(len(conv.messages), 256):
        ledger = memo["ledger"] = TokenLedger(counter, gemini_parts)  # (messages a snapshot replaced: let them go)
    entry_ids = [m.entry_id for m in conv.meta]
    attribution = attribute(conv.messages, entry_ids, ledger)
    fixed = inferred_fixed(conv, attribution.message_tokens)
    kind = "subagent" if conv.extra.get("kind") == "subagent" else "main"
    blocks, note = split_fixed(fixed, kind) if fixed else ([], "")
    last = conv.last_request
    anchored = last is not None and last.message_index is not None
    context = last.usage.prompt_tokens if anchored else None
    provider = provider_view(conv, attribution.message_tokens, fixed=fixed or 0, context_tokens=context) if anchored else None
    window = conv.context_window
    used = context if context is not None else attribution.total + (fixed or 0)
    threshold = (conv.extra.get("compression") or {}).get("threshold")
    reserve = max(window - max(int(threshold), used), 0) if window and threshold is not None else 0
    bd = compose_breakdown(attribution, context_window=window, provider_tokens=context, table=GEMINI_TABLE,
                           fixed=blocks, reserved={"compression_reserve": reserve})
    thoughts = int(conv.extra.get("thoughtsTokens") or 0)
    if thoughts:  # listed aside: recorded and billed, not in the context
        at = next((i for i, r in enumerate(bd.rows) if r.id in ("compression_reserve", "free")), len(bd.rows))
        bd.rows.insert(at, CategoryRow("thoughts", GEMINI_TABLE.labels["thoughts"], thoughts))
    model = model_info(conv.provider, conv.model, window, models=models_table, source="Gemini CLI")
    key = f"{conv.provider}/{conv.model}" if conv.model else None
    facts = {"tokens": fixed, "note": note, "kind": kind} if fixed else {}
    return Accounting(bd, provider, model, key, system_inferred=bool(fixed), extras=GeminiExtras(conv.extra, facts, window))


def cache_facts(snapshot: Any, now: float, models_table: ModelTable | None = None) -> Any:
    """The prompt cache of a Gemini CLI snapshot: `agents.plugin.request_cache_facts` with the
    prices of `gemini-models.json`, the misses the reader explains (a rewind, a compression), and a
    countdown only with the retention the user configures (`DS4TUI_CACHE_RETENTION=gemini-cli=
    SECONDS`, `ds4sessions.retention`, labelled "typical, not recorded"): Gemini's implicit cache
    reports no lifetime."""
    from ds4sessions.agents.gemini.discovery import GEMINI_CLI
    from ds4sessions.agents.plugin import request_cache_facts
    from ds4sessions.retention import ENV, retention_from_env

    conv = snapshot.conversation
    causes = {int(k): (str(v[0]), str(v[1])) for k, v in (conv.extra.get("missCauses") or {}).items()}
    retention = retention_from_env().get(GEMINI_CLI)
    return request_cache_facts(
        snapshot, now, models_table,
        lifetimes={"short": int(retention)} if retention else {},
        tier_source=f"typical, not recorded ({ENV}={GEMINI_CLI}={retention})" if retention else "not recorded",
        no_countdown=f"Gemini reports no prompt-cache lifetime (implicit caching); set {ENV}={GEMINI_CLI}=SECONDS "
                     "for a typical countdown",
        pricing_source=models.price_source(conv.model), prices=models.pricing, miss_causes=causes,
    )
