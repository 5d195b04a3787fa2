"""An OpenCode session as OpenCode sends it: its rows → a neutral `Conversation`.

`OpenCodeReader.feed(lines)` takes the rows `tail.OpenCodeTail` delivers (session, message
and part rows, removals) and keeps the session's current state; `conversation()` builds what
the cockpit reads. The rules are OpenCode 1.18.33's (read in its binary, the bundled
`packages/opencode/src/session/*.ts`):

- **What the model sees** (`MessageV2.filterCompacted`): walking from the newest message, the
  context starts at the user message of the last *completed* compaction (its `compaction`
  part; completed = an assistant `summary: true` message with a `finish` and no `error` whose
  `parentID` is that user message), plus the kept tail before it when the part names a
  `tail_start_id`. `MessageV2.toModelMessages` then sends: a user message's text parts (not
  `ignored`, not empty), its files (images as images; a `text/plain` file is already a
  synthetic text part), a `compaction` part as "What did we do so far?", a `subtask` part as
  "The following tool was executed by the user"; an assistant message unless it failed (kept
  when aborted with content), its text, its reasoning (as text when the model changed since),
  and per tool part a call plus a result: the output, "[Old tool result content cleared]" for a
  pruned one (`state.time.compacted`), the error text, or "[Tool execution was interrupted]".
  Those become Pi-shaped messages (`agents.base`): an assistant message per step (thinking,
  text, tool calls) and a `toolResult` per tool part.
- **Requests**: one per step, from its `step-finish` part (`tokens`: `input` is the uncached
  input = prompt − cache read − cache write, `cache.read`, `cache.write`, `output` excludes
  `reasoning`; `SessionProcessor` `finish-step` and `Session.getUsage`), counted once
  (`Usage.output` = output + reasoning, `Usage.reasoning` = reasoning); an assistant message
  without one has its own `tokens`. The compaction's summarisation call is a request of its
  own (`sidechain`: it never anchors the context). Title generation is no message: it is not a
  request here and not in the session's `tokens_*` sums (`extra["titleGeneration"]`).
- **Compactions**: the trio (a user message with a `compaction` part, the `summary: true`
  assistant message, the synthetic "Continue if you have next steps…" user message with
  `metadata.compaction_continue`), with the size before (the last step's `tokens.total` before
  it, what tripped `isOverflow`) and after (the next step's prompt).
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from ds4sessions.agents.base import Capabilities, Compaction, Conversation, MessageMeta, Request, Usage
from ds4sessions.ingest.diagnostics import Diagnostic, Problem

try:
    import orjson

    _loads = orjson.loads
except ImportError:  # pragma: no cover - orjson is a dependency
    _loads = json.loads

NAME = "opencode"
"""The agent id in every `--json` (`"agent": "opencode"`)."""

COMPACTION_QUESTION = "What did we do so far?"
SUBTASK_TEXT = "The following tool was executed by the user"
PRUNED_OUTPUT = "[Old tool result content cleared]"
INTERRUPTED = "[Tool execution was interrupted]"
"""The words `MessageV2.toModelMessages` (1.18.33) sends in place of a part."""

CONTINUE_PREFIX = "Continue if you have next steps"
"""How the synthetic message after an automatic compaction starts (`SessionCompaction.process`)."""

DEFAULT_TITLE_PREFIXES = ("New session - ", "Child session - ")
"""The title a session has before (or without) title generation (`Session.createDefaultTitle`)."""

FORK_TITLE = re.compile(r" \(fork #\d+\)\Z")
"""A fork's title: its source's title plus " (fork #N)" (`Session.fork`), no title generation."""

KNOWN_PARTS = frozenset({"text", "reasoning", "tool", "file", "step-start", "step-finish", "snapshot", "patch",
                         "agent", "subtask", "retry", "compaction"})
"""Part types of 1.18.33 (`MessageV2.Part`); any other is counted as a diagnostic."""

WindowLookup = Callable[[str | None, str | None, str | None], Any]
"""`(provider, model, directory) -> config.Limits` (the agent's, cached)."""


def _num(value: Any) -> int:
    kind = type(value)
    if kind is int:
        return value if value > 0 else 0  # type: ignore[no-any-return]
    return int(value) if kind is float and value > 0 else 0


def step_tokens(tokens: Any) -> dict[str, int]:
    """OpenCode's `tokens` object as flat ints: input, output, reasoning, cacheRead, cacheWrite,
    total (0 for anything missing or not a number)."""
    tokens = tokens if type(tokens) is dict else {}
    cache = tokens.get("cache") if type(tokens.get("cache")) is dict else {}
    return {"input": _num(tokens.get("input")), "output": _num(tokens.get("output")),
            "reasoning": _num(tokens.get("reasoning")), "cacheRead": _num(cache.get("read")),
            "cacheWrite": _num(cache.get("write")), "total": _num(tokens.get("total"))}


def usage_of(tokens: Mapping[str, int]) -> Usage:
    """`step_tokens` as the neutral `Usage` (disjoint buckets; output includes reasoning)."""
    return Usage(input=tokens["input"], cache_read=tokens["cacheRead"], cache_write=tokens["cacheWrite"],
                 output=tokens["output"] + tokens["reasoning"], reasoning=tokens["reasoning"])


@dataclass
class _Step:
    """One request of a message: its tokens and cost (USD as recorded)."""

    tokens: dict[str, int]
    cost: float | None


@dataclass
class _Facts:
    """A message's requests (`steps`), its `compaction` part (a user message's) or None, its
    steps' token totals (input, output, reasoning, cacheRead, cacheWrite) and cost, whether it is
    a compaction's summary, and OpenCode's sidebar count of it (a reply with output) or None."""

    steps: list[_Step]
    compaction: dict[str, Any] | None
    totals: tuple[int, ...] = (0, 0, 0, 0, 0)
    cost: float = 0.0
    summary: bool = False
    sidebar: int | None = None


@dataclass
class _Converted:
    """One OpenCode message made Pi-shaped: its messages and metas, and which of them is the
    assistant reply (index in `messages`, None for a user message)."""

    messages: list[dict[str, Any]]
    metas: list[MessageMeta]
    reply: int | None


class OpenCodeReader:
    """Rows of one OpenCode session → `Conversation` (module doc). `path` is the handle;
    `capabilities` the agent's; `limits(provider, model, directory)` the model's limits
    (`config.Limits`), `title_calls(session_id, title)` the title-generation calls
    (`{"calls", "source"}`). Never raises for bad rows: they become diagnostics."""

    def __init__(self, path: Path, capabilities: Capabilities, limits: WindowLookup | None = None,
                 title_calls: Callable[[str, str | None], Mapping[str, Any]] | None = None) -> None:
        self.path = Path(path)
        self.capabilities = capabilities
        self._limits = limits
        self._title_calls = title_calls
        self.session: dict[str, Any] = {}
        self.infos: dict[str, dict[str, Any]] = {}
        self.parts: dict[str, dict[str, dict[str, Any]]] = {}
        self._order: list[tuple[Any, str]] = []  # (time.created, id), sorted
        self._key: dict[str, tuple[Any, str]] = {}
        self._rev: dict[str, int] = {}  # message id → a number that changes with its rows
        self._converted: dict[str, tuple[Any, _Converted]] = {}
        self._facts: dict[str, tuple[int, _Facts]] = {}
        self._requests: dict[str, tuple[Any, list[Request]]] = {}
        self._compacting: set[str] = set()  # user messages with a `compaction` part
        self._bad: dict[str, Diagnostic] = {}
        self.problem: str | None = None
        self._limits_memo: tuple[tuple[Any, ...], Any] | None = None

    # --- rows --------------------------------------------------------------------------------

    def feed(self, lines: Iterable[Sequence[Any]]) -> None:
        """Apply the tail's lines `(line_no, offset, raw)` (see `tail` for their forms)."""
        for line in lines:
            raw = bytes(line[2])
            kind, _, rest = raw.partition(b"\t")
            if kind == b"P":
                mid, _, rest = rest.partition(b"\t")
                pid, _, rest = rest.partition(b"\t")
                _, _, data = rest.partition(b"\t")
                self._part(mid.decode(), pid.decode(), data)
            elif kind == b"M":
                mid, _, rest = rest.partition(b"\t")
                _, _, data = rest.partition(b"\t")
                self._message(mid.decode(), data)
            elif kind == b"S":
                row = self._json(rest, "session")
                if isinstance(row, dict):
                    self.session = row
            elif kind == b"-M":
                self._drop_message(rest.decode())
            elif kind == b"-P":
                mid, _, pid = rest.partition(b"\t")
                self._drop_part(mid.decode(), pid.decode())
            elif kind == b"!":
                self.problem = rest.decode("utf-8", "replace") or None

    def _json(self, data: bytes, rid: str) -> Any:
        try:
            value = _loads(data)
        except (ValueError, RecursionError):
            self._bad[rid] = Diagnostic(Problem.MALFORMED, f"{rid}: its data is not valid JSON",
                                        excerpt=data[:80].decode("utf-8", "replace"))
            return None
        if not isinstance(value, dict):
            self._bad[rid] = Diagnostic(Problem.NON_OBJECT, f"{rid}: its data is not a JSON object")
            return None
        self._bad.pop(rid, None)
        return value

    def _message(self, mid: str, data: bytes) -> None:
        info = self._json(data, mid)
        if info is None:
            info = {"role": "unreadable"}
        elif info.get("role") not in ("user", "assistant"):
            self._bad[mid] = Diagnostic(Problem.BAD_FIELD, f"{mid}: unknown message role {str(info.get('role'))[:40]!r} "
                                                           "(not sent)")
        info["id"] = mid
        time = info.get("time") if isinstance(info.get("time"), dict) else {}
        key = (_num(time.get("created")), mid)
        old = self._key.get(mid)
        if old != key:
            if old is not None:
                index = bisect.bisect_left(self._order, old)
                if index < len(self._order) and self._order[index] == old:
                    del self._order[index]
            bisect.insort(self._order, key)
            self._key[mid] = key
        self.infos[mid] = info
        self._touch(mid)

    def _part(self, mid: str, pid: str, data: bytes) -> None:
        part = self._json(data, pid)
        if part is None:
            part = {"type": "unreadable"}
        part["id"] = pid
        self.parts.setdefault(mid, {})[pid] = part
        kind = part.get("type")
        if not isinstance(kind, str) or (kind not in KNOWN_PARTS and kind != "unreadable"):
            self._bad[pid] = Diagnostic(Problem.BAD_FIELD, f"{pid}: unknown part type {str(kind)[:40]!r} (not sent)")
        self._touch(mid)

    def _drop_message(self, mid: str) -> None:
        key = self._key.pop(mid, None)
        if key is not None:
            index = bisect.bisect_left(self._order, key)
            if index < len(self._order) and self._order[index] == key:
                del self._order[index]
        self.infos.pop(mid, None)
        for pid in self.parts.pop(mid, {}):
            self._bad.pop(pid, None)
        self._bad.pop(mid, None)
        self._converted.pop(mid, None)
        self._facts.pop(mid, None)
        self._requests.pop(mid, None)
        self._rev.pop(mid, None)
        self._compacting.discard(mid)

    def _drop_part(self, mid: str, pid: str) -> None:
        if self.parts.get(mid, {}).pop(pid, None) is not None:
            self._touch(mid)
        self._bad.pop(pid, None)

    def _touch(self, mid: str) -> None:
        self._rev[mid] = self._rev.get(mid, 0) + 1

    # --- the conversation --------------------------------------------------------------------

    def ordered(self) -> list[str]:
        """Message ids in OpenCode's order (`time.created`, then id)."""
        return [mid for _, mid in self._order]

    def _parts_of(self, mid: str) -> list[dict[str, Any]]:
        parts = self.parts.get(mid)
        return [parts[pid] for pid in sorted(parts)] if parts else []

    def facts(self, mid: str) -> "_Facts":
        """A message's steps and its `compaction` part, made once per change of its rows."""
        rev = self._rev.get(mid, 0)
        memo = self._facts.get(mid)
        if memo is not None and memo[0] == rev:
            return memo[1]
        info = self.infos[mid]
        parts = self._parts_of(mid)
        role = info.get("role")
        compaction = next((p for p in parts if p.get("type") == "compaction"), None) if role == "user" else None
        steps = _steps(info, parts) if role == "assistant" else []
        totals = tuple(sum(step.tokens[k] for step in steps) for k in ("input", "output", "reasoning", "cacheRead", "cacheWrite"))
        sidebar = None
        if role == "assistant":
            tokens = step_tokens(info.get("tokens"))
            if tokens["output"] > 0:
                sidebar = tokens["input"] + tokens["output"] + tokens["reasoning"] + tokens["cacheRead"] + tokens["cacheWrite"]
        facts = _Facts(steps, compaction, totals, sum(step.cost or 0.0 for step in steps),
                       bool(info.get("summary")) or info.get("mode") == "compaction", sidebar)
        if compaction is not None:
            self._compacting.add(mid)
        else:
            self._compacting.discard(mid)
        self._facts[mid] = (rev, facts)
        return facts

    def _requests_of(self, mid: str, facts: "_Facts", reply: int | None, first: int) -> list[Request]:
        info = self.infos[mid]
        time = info.get("time")
        created = _num(time.get("created")) if type(time) is dict else 0
        model = str(info["modelID"]) if info.get("modelID") else None
        provider = str(info["providerID"]) if info.get("providerID") else None
        return [Request(first + i, usage_of(step.tokens), mid, created / 1000.0 if created else None, model, provider,
                        reply, sidechain=facts.summary, cost_usd=step.cost) for i, step in enumerate(facts.steps)]

    def context_ids(self, ordered: list[str]) -> list[str]:
        """The messages OpenCode sends now (`MessageV2.filterCompacted`, module doc)."""
        result: list[str] = []
        done: set[str] = set()
        stop: str | None = None
        for mid in reversed(ordered):
            info = self.infos[mid]
            result.append(mid)
            if stop is not None:
                if mid == stop:
                    break
                continue
            if info.get("role") == "user" and mid in done:
                part = self.facts(mid).compaction
                if part is None:
                    continue
                tail = part.get("tail_start_id")
                if not tail:
                    break
                stop = str(tail)
                if mid == stop:
                    break
                continue
            if info.get("role") == "assistant" and info.get("summary") and info.get("finish") and not info.get("error"):
                parent = info.get("parentID")
                if isinstance(parent, str):
                    done.add(parent)
        result.reverse()

        tails = {m for m in self._compacting if m in self.infos and (self.facts(m).compaction or {}).get("tail_start_id")
                 is not None}
        w = next((i for i in range(len(result) - 1, -1, -1) if result[i] in tails), -1) if tails else -1
        if w >= 0:
            head = result[w]
            tail_id = (self.facts(head).compaction or {}).get("tail_start_id")
            j = next((i for i in range(w + 1, len(result)) if self.infos[result[i]].get("role") == "assistant"
                      and self.infos[result[i]].get("summary") and self.infos[result[i]].get("parentID") == head), -1)
            v = result.index(tail_id) if tail_id in result else -1
            if 0 <= v < w < j:
                return [*result[w:j + 1], *result[v:w], *result[j + 1:]]
        return result

    def _convert(self, mid: str, current_model: str | None) -> _Converted:
        token = (current_model, self._rev.get(mid, 0))
        memo = self._converted.get(mid)
        if memo is not None and memo[0] == token:
            return memo[1]
        info = self.infos[mid]
        parts = self._parts_of(mid)
        role = info.get("role")
        converted = _user(info, parts) if role == "user" else _assistant(info, parts, current_model) \
            if role == "assistant" else _Converted([], [], None)  # (an unreadable or unknown message: not sent)
        self._converted[mid] = (token, converted)
        return converted

    def conversation(self) -> Conversation:
        """The frozen state of the session now (module doc). O(messages) list work; a message
        whose rows did not change keeps its Pi-shaped dicts (the same objects, so the token
        ledger counts them once)."""
        ordered = self.ordered()
        infos = self.infos
        last_user = next((infos[m] for m in reversed(ordered) if infos[m].get("role") == "user"), None)
        user_model = last_user.get("model") if last_user is not None and isinstance(last_user.get("model"), dict) else {}
        last_reply = next((infos[m] for m in reversed(ordered) if infos[m].get("role") == "assistant"), None)
        provider = user_model.get("providerID") or (last_reply or {}).get("providerID") or _session_model(self.session)[0]
        model = user_model.get("modelID") or (last_reply or {}).get("modelID") or _session_model(self.session)[1]
        current = f"{provider}/{model}" if model else None

        context = self.context_ids(ordered)
        messages: list[dict[str, Any]] = []
        metas: list[MessageMeta] = []
        reply_index: dict[str, int] = {}
        for mid in context:
            converted = self._convert(mid, current)
            if converted.reply is not None:
                reply_index[mid] = len(messages) + converted.reply
            messages += converted.messages
            metas += converted.metas

        requests: list[Request] = []
        totals = [0, 0, 0, 0, 0]  # input, output, reasoning, cacheRead, cacheWrite
        cost = 0.0
        last_step: tuple[str, dict[str, int]] | None = None
        sidebar: tuple[str, int] | None = None
        made = self._requests
        for mid in ordered:
            facts = self.facts(mid)  # (every message: a user message's compaction part is noted)
            if not facts.steps:
                if facts.sidebar is not None:
                    sidebar = (mid, facts.sidebar)
                continue
            key = (self._rev.get(mid, 0), reply_index.get(mid), len(requests))
            memo = made.get(mid)
            if memo is None or memo[0] != key:
                memo = made[mid] = (key, self._requests_of(mid, facts, key[1], key[2]))
            requests += memo[1]
            for i, value in enumerate(facts.totals):
                totals[i] += value
            cost += facts.cost
            if not facts.summary:
                last_step = (mid, facts.steps[-1].tokens)
            if facts.sidebar is not None:  # the TUI sidebar's "Context": the last reply with output
                sidebar = (mid, facts.sidebar)
        steps_total = {"input": totals[0], "output": totals[1], "reasoning": totals[2], "cacheRead": totals[3],
                       "cacheWrite": totals[4], "cost": cost}

        compactions, compaction_facts = self._compactions(ordered)
        limits = self.limits(provider, model)
        diagnostics = tuple(self._bad.values())
        session = self.session
        title = session.get("title") if isinstance(session.get("title"), str) else None
        extra: dict[str, Any] = {
            "version": session.get("version"),
            "slug": session.get("slug"),
            "steps": len(requests),
            "stepTotals": steps_total,
            "sessionTotals": _session_totals(session),
            "lastStep": {"messageId": last_step[0], **last_step[1],
                         "prompt": last_step[1]["input"] + last_step[1]["cacheRead"] + last_step[1]["cacheWrite"]}
            if last_step else None,
            "sidebar": {"messageId": sidebar[0], "tokens": sidebar[1],
                        "percent": round(sidebar[1] / limits.context * 100) if limits.context else None}
            if sidebar else None,
            "window": {"context": limits.context, "output": limits.output, "input": limits.input,
                       "source": limits.source},
            "autocompact": {"enabled": limits.auto and bool(limits.context), "usable": limits.usable() if limits.auto else None,
                            "reserved": limits.reserved},
            "compactions": compaction_facts,
            "titleGeneration": self._titles(title),
            "problem": self.problem,
        }
        return Conversation(
            agent=NAME, path=self.path, capabilities=self.capabilities, messages=tuple(messages), meta=tuple(metas),
            requests=tuple(requests), compactions=tuple(compactions),
            session_id=session.get("id") if isinstance(session.get("id"), str) else None,
            title=title, cwd=session.get("directory") if isinstance(session.get("directory"), str) else None,
            model=str(model) if model else None, provider=str(provider) if provider else None,
            context_window=limits.context, leaf_id=ordered[-1] if ordered else None,
            entries=len(infos) + sum(len(p) for p in self.parts.values()), diagnostics=diagnostics,
            parent=session.get("parent_id") if isinstance(session.get("parent_id"), str) else None, extra=extra,
        )

    def limits(self, provider: Any, model: Any) -> Any:
        """The model's limits (`config.Limits`), looked up once per model and directory."""
        from ds4sessions.agents.opencode.config import Limits

        key = (provider, model, self.session.get("directory"))
        if self._limits_memo is not None and self._limits_memo[0] == key:
            return self._limits_memo[1]
        limits = self._limits(*key) if self._limits is not None else Limits()
        self._limits_memo = (key, limits)
        return limits

    def _titles(self, title: str | None) -> dict[str, Any]:
        sid = self.session.get("id")
        found = dict(self._title_calls(str(sid), title)) if self._title_calls is not None and sid else {}
        if not found.get("calls") and title and not title.startswith(DEFAULT_TITLE_PREFIXES) \
                and not self.session.get("parent_id") and FORK_TITLE.search(title) is None:
            found = {"calls": 1, "source": "the session has a generated title"}
        return {"calls": found.get("calls", 0), "source": found.get("source"), "tokens": None,
                "note": "OpenCode records no usage for title generation: it is not in the session's token sums"}

    def _compactions(self, ordered: list[str]) -> tuple[list[Compaction], list[dict[str, Any]]]:
        out: list[Compaction] = []
        facts: list[dict[str, Any]] = []
        infos = self.infos
        compacting = [m for m in self._compacting if m in infos and self.facts(m).compaction is not None]
        if not compacting:
            return out, facts
        position = {mid: i for i, mid in enumerate(ordered)}
        for mid in sorted(compacting, key=lambda m: position.get(m, -1)):
            i = position.get(mid)
            if i is None:
                continue
            info = infos[mid]
            part = self.facts(mid).compaction or {}
            before = None
            for prev in reversed(ordered[:i]):
                steps = self.facts(prev).steps
                if steps:
                    t = steps[-1].tokens
                    before = t["total"] or t["input"] + t["output"] + t["reasoning"] + t["cacheRead"] + t["cacheWrite"]
                    break
            summary_id, summary_tokens, summary_prompt, completed = None, None, None, False
            after = None
            for later in ordered[i + 1:]:
                other = infos[later]
                if other.get("role") != "assistant":
                    continue
                steps = self.facts(later).steps
                if summary_id is None and other.get("summary") and other.get("parentID") == mid:
                    summary_id = later
                    completed = bool(other.get("finish")) and not other.get("error")
                    if steps:
                        summary_tokens = steps[-1].tokens["output"] + steps[-1].tokens["reasoning"]
                        summary_prompt = steps[-1].tokens["input"] + steps[-1].tokens["cacheRead"] + steps[-1].tokens["cacheWrite"]
                    continue
                if summary_id is not None and steps:
                    t = steps[0].tokens
                    after = t["input"] + t["cacheRead"] + t["cacheWrite"]
                    break
            time = info.get("time") if isinstance(info.get("time"), dict) else {}
            created = _num(time.get("created"))
            auto = bool(part.get("auto"))
            out.append(Compaction(mid, created / 1000.0 if created else None, "auto" if auto else "manual", before))
            facts.append({"messageId": mid, "auto": auto, "overflow": bool(part.get("overflow")), "time": created or None,
                          "completed": completed, "summaryMessageId": summary_id, "tokensBefore": before,
                          "summaryPrompt": summary_prompt, "summaryTokens": summary_tokens, "tokensAfter": after})
        return out, facts

    def diagnostic_counts(self) -> dict[str, int]:
        """Diagnostics by kind (`ConversationSession`'s counts)."""
        counts: dict[str, int] = {}
        for item in self._bad.values():
            counts[str(item.kind)] = counts.get(str(item.kind), 0) + 1
        return counts


def _session_model(session: Mapping[str, Any]) -> tuple[Any, Any]:
    raw = session.get("model")
    try:
        model = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        model = None
    if isinstance(model, dict):
        return model.get("providerID"), model.get("id") or model.get("modelID")
    return None, None


def _session_totals(session: Mapping[str, Any]) -> dict[str, Any] | None:
    if "tokens_input" not in session:
        return None
    return {"input": _num(session.get("tokens_input")), "output": _num(session.get("tokens_output")),
            "reasoning": _num(session.get("tokens_reasoning")), "cacheRead": _num(session.get("tokens_cache_read")),
            "cacheWrite": _num(session.get("tokens_cache_write")),
            "cost": float(session["cost"]) if isinstance(session.get("cost"), (int, float)) else None}


def _steps(info: Mapping[str, Any], parts: list[dict[str, Any]]) -> list[_Step]:
    """The requests of an assistant message: one per `step-finish` part, else its own tokens
    when any (a message whose step never finished has none)."""
    steps = []
    for part in parts:
        if part.get("type") == "step-finish":
            cost = part.get("cost")
            steps.append(_Step(step_tokens(part.get("tokens")),
                               float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None))
    if steps:
        return steps
    tokens = step_tokens(info.get("tokens"))
    if any(tokens[k] for k in ("input", "output", "cacheRead", "cacheWrite")):
        cost = info.get("cost")
        return [_Step(tokens, float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None)]
    return []


def _file_block(part: Mapping[str, Any]) -> dict[str, Any] | None:
    mime = str(part.get("mime") or "")
    if mime in ("text/plain", "application/x-directory"):
        return None
    if mime.startswith("image/"):
        url = str(part.get("url") or "")
        data = url.split(",", 1)[1] if url.startswith("data:") and "," in url else ""
        return {"type": "image", "mimeType": mime, "data": data}
    return {"type": "text", "text": f"[Attached {mime}: {part.get('filename') or 'file'}]"}


def _user(info: Mapping[str, Any], parts: list[dict[str, Any]]) -> _Converted:
    blocks: list[dict[str, Any]] = []
    typed = compaction = False
    for part in parts:
        kind = part.get("type")
        if kind == "text" and not part.get("ignored") and isinstance(part.get("text"), str) and part["text"] != "":
            if part.get("synthetic"):  # (e.g. OpenCode's read of an attached file)
                blocks.append({"type": "text", "text": part["text"], "synthetic": True})
            else:
                blocks.append({"type": "text", "text": part["text"]})
                typed = True
        elif kind == "file":
            block = _file_block(part)
            if block is not None:
                blocks.append(block)
        elif kind == "compaction":
            blocks.append({"type": "text", "text": COMPACTION_QUESTION})
            compaction = True
        elif kind == "subtask":
            blocks.append({"type": "text", "text": SUBTASK_TEXT})
    if not blocks:
        return _Converted([], [], None)
    time = info.get("time") if isinstance(info.get("time"), dict) else {}
    source = "compaction" if compaction else "prompt" if typed else "synthetic"
    message = {"role": "user", "content": blocks, "timestamp": _num(time.get("created")) or None}
    return _Converted([message], [MessageMeta(str(info["id"]), source=source)], None)


def _tool_result(part: Mapping[str, Any], state: Mapping[str, Any], text: str, error: bool) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    times = state.get("time") if isinstance(state.get("time"), dict) else {}
    if not error and not times.get("compacted"):
        for att in state.get("attachments") or ():
            if isinstance(att, dict):
                block = _file_block(att)
                if block is not None:
                    content.append(block)
    return {"role": "toolResult", "toolCallId": str(part.get("callID") or part.get("id")),
            "toolName": str(part.get("tool") or "?"), "content": content, "isError": error,
            "timestamp": _num(times.get("end")) or _num(times.get("start")) or None}


def _assistant(info: Mapping[str, Any], parts: list[dict[str, Any]], current: str | None) -> _Converted:
    error = info.get("error")
    if error:
        aborted = isinstance(error, dict) and error.get("name") == "MessageAbortedError"
        if not (aborted and any(p.get("type") not in ("step-start", "reasoning") for p in parts)):
            return _Converted([], [], None)
    changed = current is not None and current != f"{info.get('providerID')}/{info.get('modelID')}"
    blocks: list[dict[str, Any]] = []
    results: list[tuple[dict[str, Any], MessageMeta]] = []
    tools: list[str] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str) and part["text"]:
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "reasoning" and isinstance(part.get("text"), str):
            if changed:
                if part["text"].strip():
                    blocks.append({"type": "text", "text": part["text"]})
            elif part["text"]:
                blocks.append({"type": "thinking", "thinking": part["text"]})
        elif kind == "tool":
            state = part.get("state") if isinstance(part.get("state"), dict) else {}
            name = str(part.get("tool") or "?")
            tools.append(name)
            blocks.append({"type": "toolCall", "id": str(part.get("callID") or part.get("id")), "name": name,
                           "arguments": state.get("input") if isinstance(state.get("input"), dict) else {}})
            status = state.get("status")
            meta = MessageMeta(str(part["id"]), tool=name, source="part.tool")
            times = state.get("time") if isinstance(state.get("time"), dict) else {}
            if status == "completed":
                output = PRUNED_OUTPUT if times.get("compacted") else str(state.get("output") or "")
                results.append((_tool_result(part, state, output, False), meta))
            elif status == "error":
                metadata = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
                if metadata.get("interrupted") is True and isinstance(metadata.get("output"), str):
                    results.append((_tool_result(part, state, metadata["output"], False), meta))
                else:
                    results.append((_tool_result(part, state, str(state.get("error") or ""), True), meta))
            # pending / running: the call is in the context, its result not yet
    time = info.get("time") if isinstance(info.get("time"), dict) else {}
    summary = bool(info.get("summary"))
    message: dict[str, Any] = {"role": "assistant", "content": blocks, "timestamp": _num(time.get("created")) or None,
                               "provider": info.get("providerID"), "model": info.get("modelID")}
    if summary:
        message["ds4Category"] = "compaction"
    meta = MessageMeta(str(info["id"]), category="compaction" if summary else None,
                       tool=tools[0] if len(tools) == 1 else None,
                       source="compaction.summary" if summary else "message.assistant")
    return _Converted([message, *(m for m, _ in results)], [meta, *(m for _, m in results)], 0)
