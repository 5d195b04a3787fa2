"""Collapse finished turns into a deterministic summary built from the messages themselves.

No model call: the summary is derived from what the collapsed span recorded (Pi agent messages,
Pi session format §6):

- files modified: `path` of `edit` / `write` tool calls; files only read: `path` of `read`
  calls not also modified (Pi's file rule, `compaction/utils.js` `extractFileOpsFromMessage`,
  nested calls on tool results included);
- commands: `bash` tool calls and user `!cmd` runs (`bashExecution`); validation runs: commands
  that run tests, linters, type checkers or builds (`VALIDATION_PATTERN`);
- failures: tool results with `isError` and `bashExecution`s with a non-zero exit code, each with
  the failing command (or tool and path) and the first line of its output;
- outcome: the text of the last assistant message that has text.

The text uses the section names of DS4's summary contract (spec §6: Objective, Files Read, Files
Modified, Commands / Tests, Errors / Risks, Current State) with `` - `path` `` bullets; lists are
capped at `LIST_CAP` (12) entries, the rest counted. `collapse_cost` prices the change (prompt
cache: the collapsed span's cached prefix is lost).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

from ds4core.models import Pricing

LIST_CAP = 12
"""Longest list shown in a summary; the rest is counted (`- … and N more`)."""
PROMPT_CHARS = 300
"""Characters kept of each prompt (one line) in the Objective section."""
OUTCOME_CHARS = 2000
"""Characters kept of the outcome (the last assistant text)."""

VALIDATION_PATTERN = re.compile(
    r"(?<![\w-])("
    r"pytest|py\.test|tox|nox|unittest|jest|vitest|mocha|ava|rspec|phpunit|ctest|"
    r"(?:npm|pnpm|yarn|bun)(?:\s+run)?\s+(?:test|lint|typecheck|check|build)|node\s+--test|deno\s+test|"
    r"go\s+(?:test|vet|build)|cargo\s+(?:test|check|clippy|build)|make\s+(?:test|check|lint)|"
    r"ruff|mypy|pyright|flake8|pylint|eslint|tsc|gradlew?\s+(?:test|check|build)|mvn\s+(?:test|verify)|dotnet\s+test"
    r")(?![\w-])"
)
"""Commands counted as validation runs (tests, linters, type checkers, builds)."""

SUMMARY_HEADER = "Collapsed by ds4tui (built from the session entries, no model call)"


@dataclass(frozen=True)
class CommandRun:
    """One command: `command` text, `ok` (False for an error result / non-zero exit, None when no
    result was recorded), `detail` (first line of the failure output, else "")."""

    command: str
    ok: bool | None
    detail: str = ""


@dataclass(frozen=True)
class CollapseSummary:
    """The deterministic summary of a span of finished turns.

    `turns`, `messages`: counts; `prompts`: the user prompts (one line each, capped at
    `PROMPT_CHARS`); `modified_files` / `read_files`: sorted paths (uncapped); `commands`: every
    command run in order; `validation_runs`: the commands matching `VALIDATION_PATTERN`;
    `failures`: failed tool calls and commands; `outcome`: last assistant text ("" if none);
    `usage`: the span's assistant usages summed (Pi's Usage shape, cost in USD); `text`: the
    rendered summary.
    """

    turns: int
    messages: int
    prompts: tuple[str, ...]
    modified_files: tuple[str, ...]
    read_files: tuple[str, ...]
    commands: tuple[CommandRun, ...]
    validation_runs: tuple[CommandRun, ...]
    failures: tuple[CommandRun, ...]
    outcome: str
    usage: dict[str, Any]
    text: str


def _text_of(content: Any, sep: str = "\n") -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return sep.join(
            b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return _one_line(line, 200)
    return ""


def _failure_line(text: str) -> str:
    """The most telling line of a failure: `Command exited with code N` when present, else the first."""
    for line in reversed(text.splitlines()):
        if line.startswith("Command exited with code"):
            return line.strip()
    return _first_line(text)


def _call_label(name: str, args: Mapping[str, Any]) -> str:
    if name == "bash" and isinstance(args.get("command"), str):
        return args["command"]
    path = args.get("path")
    return f"{name} {path}" if isinstance(path, str) else name


def _add_usage(total: dict[str, Any], usage: Mapping[str, Any]) -> None:
    for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens", "cacheWrite1h"):
        value = usage.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value
    cost = usage.get("cost")
    if isinstance(cost, Mapping):
        target = total.setdefault("cost", {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0})
        for key in ("input", "output", "cacheRead", "cacheWrite", "total"):
            value = cost.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                target[key] = target[key] + value


def summarize_span(messages: Sequence[Mapping[str, Any]]) -> CollapseSummary:
    """Build the summary of `messages`: Pi agent messages of whole turns, oldest first (each turn
    starts with a `user` message). Pure and deterministic; never raises for odd content."""
    prompts: list[str] = []
    modified: set[str] = set()
    read: set[str] = set()
    calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
    commands: list[CommandRun] = []
    command_index: dict[str, int] = {}
    failures: list[CommandRun] = []
    outcome = ""
    usage: dict[str, Any] = {}

    def file_op(name: Any, args: Any) -> None:
        path = args.get("path") if isinstance(args, Mapping) else None
        if not isinstance(path, str) or not path:
            return
        if name == "read":
            read.add(path)
        elif name in ("edit", "write"):
            modified.add(path)

    for message in messages:
        role = message.get("role")
        if role == "user":
            prompts.append(_one_line(_text_of(message.get("content"), " ") or "[no text]", PROMPT_CHARS))
        elif role == "assistant":
            content = message.get("content")
            for block in content if isinstance(content, Sequence) and not isinstance(content, str) else ():
                if not isinstance(block, Mapping) or block.get("type") != "toolCall":
                    continue
                name = block.get("name")
                args = block.get("arguments") if isinstance(block.get("arguments"), Mapping) else {}
                file_op(name, args)
                if isinstance(block.get("id"), str):
                    calls[block["id"]] = (str(name), args)
                if name == "bash" and isinstance(args.get("command"), str):
                    if isinstance(block.get("id"), str):
                        command_index[block["id"]] = len(commands)
                    commands.append(CommandRun(args["command"], None))
            text = _text_of(content).strip()
            if text:
                outcome = text
            if isinstance(message.get("usage"), Mapping):
                _add_usage(usage, message["usage"])
        elif role == "toolResult":
            nested = message.get("nestedCalls")
            for call in nested.get("calls", ()) if isinstance(nested, Mapping) else ():
                if isinstance(call, Mapping):
                    file_op(call.get("name"), call.get("arguments"))
            call_id = message.get("toolCallId")
            failed = message.get("isError") is True
            detail = _failure_line(_text_of(message.get("content"))) if failed else ""
            if call_id in command_index:
                i = command_index[call_id]
                commands[i] = CommandRun(commands[i].command, not failed, detail)
            if failed:
                name, args = calls.get(call_id, (str(message.get("toolName") or "tool"), {}))
                failures.append(CommandRun(_call_label(name, args), False, detail))
        elif role == "bashExecution":
            command = str(message.get("command") or "")
            code = message.get("exitCode")
            ok = None if message.get("cancelled") else (code == 0 if isinstance(code, int) else None)
            detail = f"exit code {code}" if ok is False else ("cancelled" if message.get("cancelled") else "")
            run = CommandRun(command, ok, detail)
            commands.append(run)
            if ok is False:
                failures.append(run)

    validation = tuple(c for c in commands if VALIDATION_PATTERN.search(c.command))
    modified_files = tuple(sorted(modified))
    read_files = tuple(sorted(read - modified))
    turns = sum(1 for m in messages if m.get("role") == "user")
    summary = CollapseSummary(
        turns=turns, messages=len(messages), prompts=tuple(prompts), modified_files=modified_files,
        read_files=read_files, commands=tuple(commands), validation_runs=validation, failures=tuple(failures),
        outcome=outcome, usage=usage, text="",
    )
    return CollapseSummary(**{**summary.__dict__, "text": render_summary(summary)})


def _capped(items: Sequence[str]) -> list[str]:
    if not items:
        return ["- None"]
    lines = list(items[:LIST_CAP])
    if len(items) > LIST_CAP:
        lines.append(f"- … and {len(items) - LIST_CAP} more")
    return lines


def _run_line(run: CommandRun) -> str:
    status = {True: "ok", False: "failed", None: "no result"}[run.ok]
    detail = f": {run.detail}" if run.ok is False and run.detail else ""
    return f"- `{_one_line(run.command, 200)}` ({status}{detail})"


def render_summary(summary: CollapseSummary) -> str:
    """The summary text (markdown, DS4 section names; deterministic for equal input)."""
    turns = f"{summary.turns} turn{'s' if summary.turns != 1 else ''}"
    lines = [f"{SUMMARY_HEADER}: {turns}, {summary.messages} messages.", "", "## Objective"]
    lines += _capped([f"- {p}" for p in summary.prompts])
    lines += ["", f"## Files Modified ({len(summary.modified_files)})"]
    lines += _capped([f"- `{p}`" for p in summary.modified_files])
    lines += ["", f"## Files Read ({len(summary.read_files)})"]
    lines += _capped([f"- `{p}`" for p in summary.read_files])
    n_cmd, n_val = len(summary.commands), len(summary.validation_runs)
    counts = f"- {n_cmd} command{'s' if n_cmd != 1 else ''} run, {n_val} validation run{'s' if n_val != 1 else ''}"
    lines += ["", "## Commands / Tests", counts]
    lines += _capped([_run_line(r) for r in summary.validation_runs]) if n_val else []
    lines += ["", f"## Errors / Risks ({len(summary.failures)})"]
    lines += _capped([_run_line(r) for r in summary.failures])
    outcome = summary.outcome
    if len(outcome) > OUTCOME_CHARS:
        outcome = outcome[:OUTCOME_CHARS] + f"… ({len(summary.outcome) - OUTCOME_CHARS} more characters)"
    lines += ["", "## Current State", outcome or "- None"]
    return "\n".join(lines)


@dataclass(frozen=True)
class CollapseCost:
    """What a collapse saves and what it costs in prompt cache (tokens; USD).

    - `span_tokens`: the collapsed messages; `summary_tokens`: the summary message replacing them;
      `saved_tokens` = span − summary; `prefix_tokens`: the context before the span (stays cached);
    - `next_without_usd`: the next request's prompt without the collapse (prefix + span read from
      the cache); `next_with_usd`: with it (prefix read from the cache, the summary written anew —
      the span's cached prefix is lost); `cache_loss_usd` = with − without (may be negative);
    - `saving_per_request_usd`: on every later request (saved tokens × cache-read price);
    - `break_even_requests`: requests after the next one until the collapse has paid for itself
      (0 when it pays at once; None without prices or without a saving).

    All USD fields are None when `pricing` is None.
    """

    prefix_tokens: int
    span_tokens: int
    summary_tokens: int
    saved_tokens: int
    next_without_usd: float | None
    next_with_usd: float | None
    cache_loss_usd: float | None
    saving_per_request_usd: float | None
    break_even_requests: int | None

    def token_effect(self) -> str:
        """"saves ~N tokens (span → summary)", or "costs ~N more tokens (…): the summary is
        longer than what it replaces" when the saving is negative (tokens)."""
        span, summary = _short(self.span_tokens), _short(self.summary_tokens)
        if self.saved_tokens >= 0:
            return f"saves ~{_short(self.saved_tokens)} tokens ({span} → {summary} summary)"
        return f"costs ~{_short(-self.saved_tokens)} more tokens ({span} → {summary} summary): the summary is longer than what it replaces"

    def per_request_effect(self, usd: Callable[[float | None], str]) -> str:
        """"then $x saved per request", or "then $x more per request" for a negative saving;
        `usd` formats a USD amount (the caller's style)."""
        value = self.saving_per_request_usd
        if value is not None and value < 0:
            return f"then {usd(-value)} more per request"
        return f"then {usd(value)} saved per request"


def _short(n: int) -> str:
    if n < 1000:
        return str(n)
    return f"{n / 1000:.1f}".removesuffix(".0") + "k"


def collapse_cost(prefix_tokens: int, span_tokens: int, summary_tokens: int, pricing: Pricing | None) -> CollapseCost:
    """Price a collapse (tokens in, USD out; `pricing` in USD per million tokens).

    Assumes a warm prompt cache: without the collapse the next request reads prefix + span from
    the cache; with it, it reads the prefix and writes the summary (at the cache-write price, or
    the input price when the provider charges nothing to write).
    """
    saved = span_tokens - summary_tokens
    if pricing is None:
        return CollapseCost(prefix_tokens, span_tokens, summary_tokens, saved, None, None, None, None, None)
    prices = pricing.for_prompt(prefix_tokens + span_tokens)
    write_price = prices.cache_write or prices.input
    without = (prefix_tokens + span_tokens) * prices.cache_read / 1e6
    with_ = (prefix_tokens * prices.cache_read + summary_tokens * write_price) / 1e6
    per_request = saved * prices.cache_read / 1e6
    loss = with_ - without
    if loss <= 0:
        break_even: int | None = 0
    elif per_request > 0:
        break_even = math.ceil(loss / per_request)
    else:
        break_even = None
    return CollapseCost(prefix_tokens, span_tokens, summary_tokens, saved, without, with_, loss, per_request, break_even)
