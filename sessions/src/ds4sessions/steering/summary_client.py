"""The HTTP client of the compaction summary: request bodies in the provider's wire shape, one
POST with httpx, the reply parsed (ds4tui's own; Pi sends its summary through pi-ai).

- `Endpoint`: where the request goes (`"openai"` chat completions or `"anthropic"` messages),
  from the environment (`Endpoint.from_env`); the API key is sent in a header only, never
  logged, stored or put in an error message;
- `provider_request(api, model, messages, ...)`: Pi agent messages → a request body (Pi's
  `convertToLlm`, the replayed system prompt and tools of `ds4sessions.agents.pi.system`, and
  what Pi's adapters do: errored/aborted replies dropped);
- `request_summary(endpoint, body)`: the POST and the parsed `SummaryReply` (text + usage in Pi's
  Usage shape), or `CompactionFailed` with the reason.

The Pi port that decides *what* to summarise (cut point, preview, the appended entry) is
`ds4sessions.steering.compaction`.
"""

from __future__ import annotations

import os
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
    endpoint); the session was not touched. `str(exc)` says why."""




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
    tools = (system or {}).get("toolsAdded") or []
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


def request_summary(endpoint: Endpoint, body: Mapping[str, Any], timeout: float = 120.0) -> SummaryReply:
    """POST `body` to the endpoint with httpx; parse the summary. Raises `CompactionFailed` with
    the reason on a timeout, connection error, HTTP 4xx/5xx, truncated or invalid JSON, a reply
    cut by the token cap, a tool call, or an empty summary. The key goes only in a header."""
    headers = {"content-type": "application/json"}
    if endpoint.api == "anthropic":
        headers |= {"x-api-key": endpoint.key, "anthropic-version": "2023-06-01"}
    else:
        headers["authorization"] = f"Bearer {endpoint.key}"

    def clean(text: str) -> str:
        return text.replace(endpoint.key, "[key]") if endpoint.key else text

    try:
        response = httpx.post(endpoint.url, json=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        raise CompactionFailed(f"the summary request to {endpoint.url} timed out after {timeout:g} s") from None
    except httpx.RemoteProtocolError as err:
        raise CompactionFailed(f"the reply from {endpoint.url} was cut off ({clean(str(err))})") from None
    except httpx.HTTPError as err:
        raise CompactionFailed(f"the summary request to {endpoint.url} failed: {clean(str(err))}") from None
    if response.status_code >= 400:
        raise CompactionFailed(f"{endpoint.url} answered HTTP {response.status_code}: {clean(response.text[:300])}")
    try:
        data = response.json()
    except ValueError:
        raise CompactionFailed(f"the reply from {endpoint.url} is truncated or not JSON ({len(response.content)} bytes)") from None
    if not isinstance(data, dict):
        raise CompactionFailed("the reply is not a JSON object")
    if endpoint.api == "anthropic":
        stop = data.get("stop_reason")
        blocks = data.get("content") if isinstance(data.get("content"), list) else []
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        tool_call = any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks)
        u = data.get("usage") if isinstance(data.get("usage"), dict) else None
        usage = _usage(u.get("input_tokens", 0), u.get("output_tokens", 0), u.get("cache_read_input_tokens", 0) or 0,
                       u.get("cache_creation_input_tokens", 0) or 0) if u else None
        truncated = stop == "max_tokens"
        finished = stop in ("end_turn", "stop_sequence", "max_tokens")
    else:
        choices = data.get("choices") if isinstance(data.get("choices"), list) else []
        choice = choices[0] if choices and isinstance(choices[0], dict) else {}
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        stop = choice.get("finish_reason")
        text = message.get("content") if isinstance(message.get("content"), str) else ""
        tool_call = bool(message.get("tool_calls"))
        u = data.get("usage") if isinstance(data.get("usage"), dict) else None
        usage = None
        if u:
            cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0) or 0
            usage = _usage(u.get("prompt_tokens", 0) - cached, u.get("completion_tokens", 0), cached, 0)
        truncated = stop == "length"
        finished = stop in ("stop", "length")
    if truncated:
        raise CompactionFailed("the summary hit the token cap and is incomplete")
    if not finished:
        raise CompactionFailed(f"the reply did not finish (stop reason {stop!r})")
    if tool_call:
        raise CompactionFailed("the model tried to call a tool instead of summarising")
    if not text.strip():
        raise CompactionFailed("the reply holds no summary text")
    return SummaryReply(text.strip(), usage)


def _usage(input_: int, output: int, cache_read: int, cache_write: int) -> dict[str, Any]:
    return {
        "input": input_, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write,
        "totalTokens": input_ + output + cache_read + cache_write,
    }
