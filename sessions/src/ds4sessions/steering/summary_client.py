"""The HTTP client of the compaction summary: request bodies in the provider's wire shape, one
POST with httpx, the reply parsed (ds4tui's own; Pi sends its summary through pi-ai).

- `Endpoint`: where the request goes (`"openai"` chat completions or `"anthropic"` messages),
  from the environment (`Endpoint.from_env`); the API key is sent in a header only, never
  logged, stored or put in an error message;
- `provider_request(api, model, messages, ...)`: Pi agent messages → a request body (Pi's
  `convertToLlm`, the replayed system prompt and tools of `ds4sessions.agents.pi.system`, and
  what Pi's adapters do: errored/aborted replies dropped);
- `request_summary(endpoint, body)`: the POST, the reply streamed in up to `MAX_REPLY_BYTES`
  (8 MiB) within the timeout, and the parsed `SummaryReply` (text + usage in Pi's Usage shape),
  or `CompactionFailed` with the reason;
- `parse_reply(api, raw)`: the one conformance layer for a model's reply: depth checked on the
  bytes, strict JSON (no NaN), every field the API documents type-checked, usage counts integers
  in 0..2**53 (issue 30: a list for an object, string usage, a numeric text or 100,000-deep
  nesting were internal errors; NaN usage was written as `null`).

The Pi port that decides *what* to summarise (cut point, preview, the appended entry) is
`ds4sessions.steering.compaction`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from ds4core.jsjson import stringify

from ds4sessions.agents.pi.context import convert_to_llm
from ds4sessions.agents.pi.system import content_text as _content_text
from ds4sessions.agents.pi.system import current_system_message, system_prompt_text

DEFAULT_RESERVE_TOKENS = 16384
"""Pi's default `compaction.reserveTokens`: the summary request's output cap (tokens)."""


class CompactionFailed(Exception):
    """The summary request failed (timeout, HTTP error, truncated/invalid reply, token cap, no
    endpoint); the session was not touched. `str(exc)` says why, with secrets redacted
    (`ds4sessions.safety.redact`: URL credentials, `?key=`, Authorization values)."""

    def __init__(self, message: str) -> None:
        from ds4sessions.safety import redact

        super().__init__(redact(message))




@dataclass(frozen=True)
class Endpoint:
    """Where the summary request goes: `api` (`"openai"` chat completions or `"anthropic"`
    messages), `base_url` (without `/v1/...`), `model` id, and the API key (never shown)."""

    api: str
    base_url: str
    model: str
    key: str = field(repr=False, default="")

    @property
    def url(self) -> str:
        """The request URL: `<base>/v1/chat/completions` or `<base>/v1/messages`."""
        base = self.base_url.rstrip("/")
        base = base.removesuffix("/v1")
        return base + ("/v1/messages" if self.api == "anthropic" else "/v1/chat/completions")

    @staticmethod
    def from_env(session_model: Mapping[str, Any] | None, env: Mapping[str, str] | None = None) -> Endpoint:
        """The endpoint from the environment.

        `DS4TUI_SUMMARY_API` (`openai` | `anthropic`; default: `anthropic` when the session's
        provider is `anthropic`, else `openai`), `DS4TUI_SUMMARY_BASE_URL` (default
        `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, else the vendor's public URL),
        `DS4TUI_SUMMARY_MODEL` (default: the session's model id), `DS4TUI_SUMMARY_API_KEY`
        (default `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`). Raises `CompactionFailed` when no key
        or no model is set.
        """
        env = os.environ if env is None else env
        provider = (session_model or {}).get("provider")
        api = env.get("DS4TUI_SUMMARY_API") or ("anthropic" if provider == "anthropic" else "openai")
        if api not in ("openai", "anthropic"):
            raise CompactionFailed(f"DS4TUI_SUMMARY_API must be openai or anthropic, not {api!r}")
        vendor = "ANTHROPIC" if api == "anthropic" else "OPENAI"
        default_url = "https://api.anthropic.com" if api == "anthropic" else "https://api.openai.com"
        base = env.get("DS4TUI_SUMMARY_BASE_URL") or env.get(f"{vendor}_BASE_URL") or default_url
        key = env.get("DS4TUI_SUMMARY_API_KEY") or env.get(f"{vendor}_API_KEY") or ""
        model = env.get("DS4TUI_SUMMARY_MODEL") or (session_model or {}).get("modelId") or ""
        if not key:
            raise CompactionFailed(f"no API key: set DS4TUI_SUMMARY_API_KEY (or {vendor}_API_KEY)")
        if not model:
            raise CompactionFailed("no model: set DS4TUI_SUMMARY_MODEL")
        return Endpoint(api, base, model, key)


def _openai_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pending: list[str] = []

    def flush() -> None:
        out.extend({"role": "tool", "tool_call_id": cid, "content": "No result provided"} for cid in pending)
        pending.clear()

    for m in messages:
        role = m.get("role")
        if role == "toolResult":
            cid = m.get("toolCallId")
            if cid in pending:
                pending.remove(cid)
            out.append({"role": "tool", "tool_call_id": cid, "content": _content_text(m.get("content")) or "(no output)"})
            continue
        flush()
        if role == "user":
            content = m.get("content")
            if isinstance(content, str):
                out.append({"role": "user", "content": content})
            else:
                parts = []
                for b in content or ():
                    if b.get("type") == "text":
                        parts.append({"type": "text", "text": b.get("text", "")})
                    elif b.get("type") == "image":
                        parts.append({"type": "image_url", "image_url": {"url": f"data:{b.get('mimeType')};base64,{b.get('data')}"}})
                out.append({"role": "user", "content": parts})
        elif role == "assistant":
            blocks = m.get("content") or []
            msg: dict[str, Any] = {"role": "assistant", "content": _content_text(blocks) or None}
            calls = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "toolCall"]
            if calls:
                msg["tool_calls"] = [
                    {"id": b.get("id"), "type": "function", "function": {"name": b.get("name"), "arguments": stringify(b.get("arguments") or {})}}
                    for b in calls
                ]
                pending.extend(b.get("id") for b in calls)
            out.append(msg)
    flush()
    return out


def _anthropic_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pending: list[str] = []

    def add_user_blocks(blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == "user":
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": "user", "content": blocks})

    def flush() -> None:
        if pending:
            add_user_blocks([{"type": "tool_result", "tool_use_id": cid, "content": "No result provided", "is_error": True} for cid in pending])
            pending.clear()

    for m in messages:
        role = m.get("role")
        if role == "toolResult":
            cid = m.get("toolCallId")
            if cid in pending:
                pending.remove(cid)
            add_user_blocks([{
                "type": "tool_result", "tool_use_id": cid,
                "content": [{"type": "text", "text": _content_text(m.get("content")) or "(no output)"}],
                "is_error": bool(m.get("isError")),
            }])
            continue
        flush()
        if role == "user":
            content = m.get("content")
            if isinstance(content, str):
                blocks = [{"type": "text", "text": content}]
            else:
                blocks = []
                for b in content or ():
                    if b.get("type") == "text":
                        blocks.append({"type": "text", "text": b.get("text", "")})
                    elif b.get("type") == "image":
                        blocks.append({"type": "image", "source": {"type": "base64", "media_type": b.get("mimeType"), "data": b.get("data")}})
            add_user_blocks(blocks)
        elif role == "assistant":
            blocks = []
            for b in m.get("content") or ():
                if b.get("type") == "text" and b.get("text"):
                    blocks.append({"type": "text", "text": b["text"]})
                elif b.get("type") == "toolCall":
                    blocks.append({"type": "tool_use", "id": b.get("id"), "name": b.get("name"), "input": b.get("arguments") or {}})
                    pending.append(b.get("id"))
            if blocks:
                out.append({"role": "assistant", "content": blocks})
    flush()
    return out


def _request_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Provider-bound LLM messages: Pi's `convertToLlm`, then what Pi's adapters do: drop
    system messages (replayed into one system prompt) and errored/aborted assistant replies."""
    return [
        m for m in convert_to_llm(list(messages))
        if m.get("role") != "system" and not (m.get("role") == "assistant" and m.get("stopReason") in ("aborted", "error"))
    ]


def provider_request(
    api: str, model: str, messages: Sequence[Mapping[str, Any]], *, extra_user_text: str | None = None,
    max_tokens: int = DEFAULT_RESERVE_TOKENS,
) -> dict[str, Any]:
    """The request body for `messages` (Pi agent messages of a context, in order): the replayed
    system prompt and tools, then the messages in the API's wire shape; `extra_user_text` is
    appended as a final user message. Anthropic: a `cache_control` breakpoint on the last
    block of `messages` (where the previous request ended), and on the system prompt."""
    system = current_system_message(messages)
    prompt = system_prompt_text(system)
    tools = system.get("toolsAdded") if isinstance(system, Mapping) and isinstance(system.get("toolsAdded"), list) else []
    wire = _request_messages(messages)
    if api == "anthropic":
        body_messages = _anthropic_messages(wire)
        if body_messages:
            last = body_messages[-1]["content"][-1]
            last["cache_control"] = {"type": "ephemeral"}
        if extra_user_text is not None:
            text = {"type": "text", "text": extra_user_text}
            if body_messages and body_messages[-1]["role"] == "user":
                body_messages[-1]["content"].append(text)
            else:
                body_messages.append({"role": "user", "content": [text]})
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": body_messages}
        if prompt:
            body["system"] = [{"type": "text", "text": prompt, "cache_control": {"type": "ephemeral"}}]
        if tools:
            body["tools"] = [{"name": t.get("name"), "description": t.get("description", ""), "input_schema": t.get("parameters") or {}} for t in tools]
            body["tool_choice"] = {"type": "none"}
        return body
    body_messages = ([{"role": "system", "content": prompt}] if prompt else []) + _openai_messages(wire)
    if extra_user_text is not None:
        body_messages.append({"role": "user", "content": extra_user_text})
    body = {"model": model, "max_tokens": max_tokens, "messages": body_messages}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": t.get("name"), "description": t.get("description", ""), "parameters": t.get("parameters") or {}}} for t in tools]
        body["tool_choice"] = "none"
    return body


@dataclass(frozen=True)
class SummaryReply:
    """The model's summary `text` and its `usage` in Pi's Usage shape (None if not reported)."""

    text: str
    usage: dict[str, Any] | None


MAX_REPLY_BYTES = 8 << 20
"""The most bytes of a summary reply read (8 MiB; a summary capped at `reserveTokens` = 16,384
tokens is ~100 KB of JSON). A longer reply is refused while it streams in, so a hostile or broken
endpoint cannot fill the memory (issue 30: a 400 MB reply took ~870 MB RSS)."""
MAX_COUNT = 2**53
"""A usage count must be an integer in 0..2**53 (JavaScript's safe integers: Pi's `Usage`)."""


def request_summary(
    endpoint: Endpoint, body: Mapping[str, Any], timeout: float = 120.0, *, max_bytes: int = MAX_REPLY_BYTES
) -> SummaryReply:
    """POST `body` to the endpoint with httpx, stream the reply (at most `max_bytes`, within
    `timeout` seconds in all), and parse it (`parse_reply`). Raises `CompactionFailed` with the
    reason on a timeout, connection error, HTTP 4xx/5xx, a reply above `max_bytes` (refused by its
    Content-Length, else as soon as it passes the cap), or whatever `parse_reply` refuses. The key
    goes only in a header."""
    headers = {"content-type": "application/json"}
    if endpoint.api == "anthropic":
        headers |= {"x-api-key": endpoint.key, "anthropic-version": "2023-06-01"}
    else:
        headers["authorization"] = f"Bearer {endpoint.key}"

    def clean(text: str) -> str:
        return text.replace(endpoint.key, "[key]") if endpoint.key else text

    deadline = time.monotonic() + timeout
    try:
        with httpx.stream("POST", endpoint.url, json=body, headers=headers, timeout=timeout) as response:
            if response.status_code >= 400:
                head = _read_capped(response, 4096, deadline, endpoint.url, timeout, refuse=False)
                text = head.decode("utf-8", "replace")[:300]
                raise CompactionFailed(f"{endpoint.url} answered HTTP {response.status_code}: {clean(' '.join(text.split()))}")
            length = response.headers.get("content-length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise CompactionFailed(
                    f"the reply from {endpoint.url} is {int(length):,} bytes, above the {max_bytes:,}-byte cap of a "
                    "summary reply; refused before reading it"
                )
            raw = _read_capped(response, max_bytes, deadline, endpoint.url, timeout)
    except httpx.TimeoutException:
        raise CompactionFailed(f"the summary request to {endpoint.url} timed out after {timeout:g} s") from None
    except httpx.RemoteProtocolError as err:
        raise CompactionFailed(f"the reply from {endpoint.url} was cut off ({clean(str(err))})") from None
    except httpx.HTTPError as err:
        raise CompactionFailed(f"the summary request to {endpoint.url} failed: {clean(str(err))}") from None
    return parse_reply(endpoint.api, raw, endpoint.url)


def _read_capped(
    response: httpx.Response, cap: int, deadline: float, url: str, timeout: float, *, refuse: bool = True
) -> bytes:
    """The reply's (decoded) bytes, read chunk by chunk: at most `cap` bytes (more: refused, or
    cut at `cap` when not `refuse`), before `deadline` (`time.monotonic()`)."""
    chunks: list[bytes] = []
    total = 0
    for chunk in response.iter_bytes():
        total += len(chunk)
        if total > cap:
            if not refuse:
                chunks.append(chunk[: cap - (total - len(chunk))])
                break
            raise CompactionFailed(f"the reply from {url} passed the {cap:,}-byte cap of a summary reply; refused")
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise CompactionFailed(f"the summary request to {url} timed out after {timeout:g} s (the reply kept coming)")
    return b"".join(chunks)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_reply(api: str, raw: bytes, url: str = "the endpoint") -> SummaryReply:
    """The summary and its usage from a reply body (`api`: `"openai"` chat completions or
    `"anthropic"` messages), every value type- and range-checked before anything is written
    (issue 30). Raises `CompactionFailed` with one line naming what is wrong: not JSON (NaN and
    Infinity included), nested deeper than `MAX_DEPTH` (checked on the bytes, before parsing),
    an array or a number where the API has an object or a string (`choices[0].message`,
    `content[1]`, `text`), a usage count that is not an integer in 0..2**53 (a string, NaN,
    `1e308`, `10**30`, negative), more cached than prompt tokens; a summary cut by the token cap,
    an unfinished reply, a tool call, or no summary text."""
    from ds4sessions.ingest.limits import MAX_DEPTH, json_depth

    if json_depth(raw) > MAX_DEPTH:
        raise CompactionFailed(f"the reply from {url} nests deeper than {MAX_DEPTH} levels; refused")
    try:
        data = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as err:
        why = str(err) if "is not JSON" in str(err) else "truncated or not JSON"
        raise CompactionFailed(f"the reply from {url} is {why} ({len(raw):,} bytes)") from None
    reply = _Shape(data, "the reply")
    if api == "anthropic":
        stop = reply.optional_str("stop_reason")
        blocks = reply.list("content")
        texts = []
        tool_call = False
        for block in blocks:
            kind = block.optional_str("type")
            if kind == "text":
                texts.append(block.str("text"))
            tool_call = tool_call or kind == "tool_use"
        text = "".join(texts)
        u = reply.optional_object("usage")
        usage = _usage(u.count("input_tokens"), u.count("output_tokens"), u.count("cache_read_input_tokens"),
                       u.count("cache_creation_input_tokens")) if u is not None else None
        truncated = stop == "max_tokens"
        finished = stop in ("end_turn", "stop_sequence", "max_tokens")
    else:
        choices = reply.list("choices")
        choice = choices[0] if choices else _Shape({}, "the reply's choices[0]")
        message = choice.optional_object("message") or _Shape({}, choice.where + ".message")
        stop = choice.optional_str("finish_reason")
        text = message.optional_str("content") or ""
        tool_call = bool(message.optional_list("tool_calls"))
        u = reply.optional_object("usage")
        usage = None
        if u is not None:
            details = u.optional_object("prompt_tokens_details")
            cached = details.count("cached_tokens") if details is not None else 0
            prompt = u.count("prompt_tokens")
            if cached > prompt:
                raise CompactionFailed(f"the reply's usage has more cached tokens ({cached:,}) than prompt tokens ({prompt:,})")
            usage = _usage(prompt - cached, u.count("completion_tokens"), cached, 0)
        truncated = stop == "length"
        finished = stop in ("stop", "length")
    if usage is not None and usage["totalTokens"] > MAX_COUNT:
        raise CompactionFailed(f"the reply's usage adds up to {usage['totalTokens']:,} tokens, beyond 2**53")
    if truncated:
        raise CompactionFailed("the summary hit the token cap and is incomplete")
    if not finished:
        raise CompactionFailed(f"the reply did not finish (stop reason {_brief(stop)})")
    if tool_call:
        raise CompactionFailed("the model tried to call a tool instead of summarising")
    if not text.strip():
        raise CompactionFailed("the reply holds no summary text")
    return SummaryReply(text.strip(), usage)


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"a number ({_brief(value)})"
    if isinstance(value, str):
        return f"a string ({_brief(value)})"
    return "an array" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


class _Shape:
    """A JSON object of the reply at `where`, read with type checks: each accessor returns the
    value of the type the API documents or raises `CompactionFailed` naming the field."""

    def __init__(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise CompactionFailed(f"{where} is {_kind(value)}, not a JSON object")
        self.value = value
        self.where = where

    def _wrong(self, key: str, wanted: str) -> CompactionFailed:
        return CompactionFailed(f"{self.where}'s {key} is {_kind(self.value.get(key))}, not {wanted}")

    def optional_str(self, key: str) -> str | None:
        value = self.value.get(key)
        if value is not None and not isinstance(value, str):
            raise self._wrong(key, "a string")
        return value

    def str(self, key: str) -> str:
        value = self.value.get(key)
        if not isinstance(value, str):
            raise self._wrong(key, "a string")
        return value

    def optional_list(self, key: str) -> list[Any]:
        value = self.value.get(key)
        if value is not None and not isinstance(value, list):
            raise self._wrong(key, "an array")
        return value or []

    def list(self, key: str) -> list[_Shape]:
        value = self.value.get(key)
        if not isinstance(value, list):
            raise self._wrong(key, "an array")
        return [_Shape(item, f"{self.where}'s {key}[{i}]") for i, item in enumerate(value)]

    def optional_object(self, key: str) -> _Shape | None:
        value = self.value.get(key)
        if value is None:
            return None
        return _Shape(value, f"{self.where}'s {key}")

    def count(self, key: str) -> int:
        value = self.value.get(key)
        if value is None:
            return 0
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if type(value) is not int or not 0 <= value <= MAX_COUNT:
            raise self._wrong(key, "a token count (an integer in 0..2**53)")
        return value


def _usage(input_: int, output: int, cache_read: int, cache_write: int) -> dict[str, Any]:
    return {
        "input": input_, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write,
        "totalTokens": input_ + output + cache_read + cache_write,
    }
