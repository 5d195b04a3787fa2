"""DS4's slash-command text for a plan: `/context tokens` and `/context explain` (spec §7.2).

Pure formatting of a `ds4sessions.derive.manifest.PlanView` into lines (0.3.7 layout).
"""

from __future__ import annotations

from collections.abc import Sequence

from ds4sessions.derive.manifest import GroupRef, PlanView

__all__ = ["explain_lines", "tokens_lines"]


def _n(value: int | float | None) -> str:
    """en-US integer, or `n/a` when missing (DS4's slash-command format)."""
    return "n/a" if value is None else f"{round(value):,}"


def _rows(pairs: Sequence[tuple[str, str]], indent: str = "") -> list[str]:
    width = max((len(label) for label, _ in pairs), default=0)
    return [f"{indent}{label.ljust(width)}  {value}" for label, value in pairs]


def _group_list(groups: Sequence[GroupRef], limit: int = 4) -> str:
    names = ", ".join(g.id for g in groups[:limit])
    return names + (f", … {len(groups) - limit} more" if len(groups) > limit else "")


def tokens_lines(view: PlanView) -> list[str]:
    """What DS4's `/context tokens` prints for this plan (0.3.7 layout, spec §7.2), as lines.
    Per-kind rows sum the included items, supplements included (`Historical retrieval` is the
    sent evidence; `pending` on a first paint planned before retrieval ran). The cache-aware
    block is absent (the nominal plan is shown); artifactized results are not reconstructed
    from the session."""
    mode = view.mode if view.config_mode == "managed" else "observer"
    kinds = view.totals.by_kind
    budget = view.budget
    usage = view.provider_usage
    cal = view.awareness.calibration
    out = [f"DS4 Context Tokens ({mode} mode)"]
    out += _rows(
        [
            ("System prompt", _n(view.totals.system_tokens)),
            ("Tool definitions", _n(view.totals.tool_tokens)),
            ("AgentMessage[]", _n(view.totals.message_tokens)),
        ]
    )
    out += _rows(
        [
            ("Recent verbatim", _n(kinds.get("recent", 0))),
            ("Pinned context", _n(kinds.get("pin", 0))),
            ("Durable memory", _n(kinds.get("memory", 0))),
            ("Historical retrieval", "pending" if view.retrieval_pending else _n(kinds.get("retrieval", 0))),
            ("Project snippets", _n(kinds.get("project", 0))),
            ("Artifactized results*", "n/a"),
            ("Active summaries", _n(kinds.get("summary", 0))),
            ("Current request", _n(kinds.get("current", 0))),
        ],
        indent="  ",
    )
    out += _rows(
        [
            ("Estimated provider input", _n(view.totals.estimated_input_tokens)),
            ("Actual provider input", _n(usage.prompt_tokens if usage else None)),
            ("Uncached input", _n(usage.input if usage else None)),
            ("Cache read / write", f"{_n(usage.cache_read)} / {_n(usage.cache_write)}" if usage else "n/a"),
            ("Pi reported context", _n(view.pi_context_tokens)),
            ("Model context window", _n(budget.context_window)),
            ("Output reserve", _n(budget.output_reserve)),
            ("Safety margin", _n(budget.safety_margin)),
            ("Estimator calibration", f"x{cal.applied_ratio:.3f} ({cal.accepted_samples} samples)"),
            ("Nominal soft / hard", f"{_n(budget.nominal_soft_input_limit)} / {_n(budget.nominal_hard_input_limit)}"),
            ("Soft input limit", _n(budget.soft_input_limit)),
            ("Hard input limit", _n(budget.hard_input_limit)),
            ("Preferred input target", _n(budget.preferred_input_target)),
            ("Active input budget", _n(budget.active_input_budget)),
        ]
    )
    out.append("Estimates are chars-v1 tokens; actual numbers are the latest reply's provider usage.")
    out.append("* Artifactized tool results live in DS4's store and are not reconstructed here.")
    return out


_SUPPLEMENT_TITLES = {"pin": "Persistent pins", "memory": "Durable memory", "retrieval": "Retrieval evidence", "project": "Project snippets"}


def _supplement_rows(view: PlanView) -> list[tuple[str, str]]:
    """Per supplement kind handed to the planner: items selected (their tokens) and excluded."""
    if view.retrieval_pending:
        return [("Retrieval evidence", "pending")]
    counts: dict[str, list[int]] = {}  # kind -> [selected, selected tokens, excluded]
    for item in view.items:
        if item.is_supplement:
            row = counts.setdefault(item.kind, [0, 0, 0])
            if item.included:
                row[0] += 1
                row[1] += item.tokens
            else:
                row[2] += 1
    if view.supplements and view.mode == "fallback":
        return [("Supplements", f"{len(view.supplements)} dropped by the fallback")]
    return [
        (_SUPPLEMENT_TITLES.get(kind, kind), f"{_n(n)} selected ({_n(tokens)} tokens), {_n(excluded)} excluded")
        for kind, (n, tokens, excluded) in counts.items()
    ]


def explain_lines(view: PlanView) -> list[str]:
    """What DS4's `/context explain` prints for this plan (0.3.7 layout, spec §7.2), as lines.
    The group counts include the supplement groups (DS4's `selectedGroupCount` /
    `excludedGroupCount`); ds4tui adds, after them, one row per supplement kind that was
    planned (`Retrieval evidence: N selected (T tokens), M excluded`) and a `pending` row on a
    first paint planned before retrieval ran."""
    out: list[str] = []
    if view.what_if:
        from ds4sessions.agents.registry import agent_named

        agent = agent_named(view.agent)
        label = getattr(agent, "label", view.agent) if agent is not None else view.agent
        out.append(f"What DS4 would send: a what-if ({label} builds its own context; DS4 does not run inside it).")
        out.append("")
    if view.config_mode != "managed":
        out.append("Latest context used observer mode; no managed-context selection was applied.")
        out.append("The plan DS4 would make in managed mode follows.")
    planning = view.plan.planning
    out.append("DS4 Context Plan")
    rows = [
        ("Mode", view.mode),
        ("Original messages", _n(planning.original_message_count)),
        ("Original tokens", _n(planning.original_message_tokens)),
        ("Fixed system/tools", f"{_n(planning.fixed_tokens)} ({view.fixed_source})"),
        ("Message target", _n(planning.message_target_tokens)),
        ("Message hard limit", _n(planning.message_hard_limit_tokens)),
        ("Recent-tail limit", _n(planning.recent_tail_token_limit)),
    ]
    if view.rescued_predecessor is not None:
        g = view.rescued_predecessor
        rows.append(("Rescued predecessor", f"yes ({g.id}, {_n(g.tokens)} tokens)"))
    if view.oversized_exclusions:
        rows.append(("Oversized turn excl", f"{len(view.oversized_exclusions)} ({_group_list(view.oversized_exclusions)})"))
    rows += [
        ("Selected groups", _n(planning.selected_group_count)),
        ("Excluded groups", _n(planning.excluded_group_count)),
    ]
    rows += _supplement_rows(view)
    rows.append(("Duration", f"{view.duration_ms:.1f} ms (planner {view.planner_ms:.1f} ms)"))
    if planning.fallback_reason is not None:
        rows.append(("Fallback reason", planning.fallback_reason))
    out += _rows(rows)
    out.append("Each manifest row carries the rule that selected or excluded it.")
    if view.what_if:
        out.append("Pins are Pi labels starting with ds4:pin: a what-if has none to honour.")
    else:
        out.append("Pin a turn with a Pi label starting with ds4:pin.")
    return out

