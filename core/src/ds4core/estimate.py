"""DS4's `chars-v1` token estimator (spec §1.1-§1.3) and the estimator protocol.

All counts are in estimator tokens ("chars-v1 units"), not provider tokens: one token per four
UTF-16 code units of text, plus fixed wrappers per message (8), per content block (4) and per
image (1024). Messages are plain dicts shaped like Pi agent messages (`role`, `content`, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ds4core.jsjson import UNDEFINED, stable_stringify, stringify, utf16_len

__all__ = [
    "CHARS_V1",
    "CONTENT_BLOCK_WRAPPER_TOKENS",
    "IMAGE_TOKENS",
    "MESSAGE_WRAPPER_TOKENS",
    "TOOL_DEFINITION_WRAPPER_TOKENS",
    "CharsV1Estimator",
    "Estimator",
    "fixed_tokens",
    "message_tokens",
    "messages_tokens",
    "system_prompt_tokens",
    "text_tokens",
    "tool_tokens",
]

MESSAGE_WRAPPER_TOKENS = 8
"""Tokens charged for every message, whatever its shape."""
CONTENT_BLOCK_WRAPPER_TOKENS = 4
"""Tokens charged for every object content block."""
IMAGE_TOKENS = 1024
"""Flat estimate for one image block (plus the block wrapper)."""
TOOL_DEFINITION_WRAPPER_TOKENS = 12
"""Tokens charged per active tool definition on top of its stable JSON (DS4 0.3.7 runtime)."""
_CHARS_PER_TOKEN = 4


@runtime_checkable
class Estimator(Protocol):
    """A message token estimator. `name` is the estimator version recorded in manifests and
    calibration histories (`"chars-v1"`, `"o200k-base-v1"`, ...); `message_tokens` returns the
    estimated tokens (>= 0) of one Pi agent message (any JSON-shaped value)."""

    name: str

    def message_tokens(self, msg: Any) -> int:
        """Estimated tokens of one message."""
        ...


def _json_or_text(value: Any) -> str:
    # DS4's safeJson: JSON.stringify(value) ?? "", falling back to String(value) when it throws.
    try:
        return stringify(value) or ""
    except TypeError:
        return str(value)


def text_tokens(s: str) -> int:
    """`chars-v1` tokens of a string: 0 if empty, else ceil(UTF-16 length / 4) (spec §1.1)."""
    if not s:
        return 0
    return -(-utf16_len(s) // _CHARS_PER_TOKEN)


def _content_tokens(content: Any) -> int:
    if isinstance(content, str):
        return text_tokens(content)
    if not isinstance(content, (list, tuple)):
        return text_tokens(_json_or_text(content))
    total = 0
    for block in content:
        if not isinstance(block, dict):
            total += text_tokens(_json_or_text(block))
            continue
        kind = block.get("type")
        if kind == "image":
            total += IMAGE_TOKENS
        elif kind == "text" and isinstance(block.get("text"), str):
            total += text_tokens(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            total += text_tokens(block["thinking"])
        elif kind == "toolCall":
            name = block.get("name")
            name = name if isinstance(name, str) else ""
            total += text_tokens(name + _json_or_text(block.get("arguments", UNDEFINED)))
        else:
            total += text_tokens(_json_or_text(block))
        total += CONTENT_BLOCK_WRAPPER_TOKENS
    return total


def message_tokens(msg: Any) -> int:
    """`chars-v1` tokens of one Pi agent message (spec §1.2).

    A non-dict message costs text(JSON(msg)) + 8. A dict costs 8 + text(role) + content cost
    (when the key `content` exists, even if null) + text of the string fields `summary`, `command`,
    `output` and `toolName`. Content blocks: image 1028, text/thinking text + 4, toolCall
    text(name + JSON(arguments)) + 4, other objects text(JSON(block)) + 4, non-objects
    text(JSON(block)). JSON is JavaScript's `JSON.stringify` (see `ds4core.jsjson`).
    """
    if not isinstance(msg, dict):
        return text_tokens(_json_or_text(msg)) + MESSAGE_WRAPPER_TOKENS
    total = MESSAGE_WRAPPER_TOKENS
    role = msg.get("role")
    if isinstance(role, str):
        total += text_tokens(role)
    if "content" in msg:
        total += _content_tokens(msg["content"])
    for key in ("summary", "command", "output", "toolName"):
        value = msg.get(key)
        if isinstance(value, str):
            total += text_tokens(value)
    return total


def messages_tokens(msgs: Iterable[Any]) -> int:
    """Sum of `message_tokens` over a list of messages."""
    return sum(message_tokens(m) for m in msgs)


def system_prompt_tokens(system_prompt: str | None) -> int:
    """Tokens of the system prompt: text(prompt) + 8 when non-empty, else 0 (DS4 0.3.7 runtime)."""
    if not system_prompt:
        return 0
    return text_tokens(system_prompt) + MESSAGE_WRAPPER_TOKENS


def tool_tokens(tool: Mapping[str, Any]) -> int:
    """Tokens of one active tool definition: text(stableStringify({name, description,
    parameters})) + 12 (DS4 0.3.7 runtime). Missing fields are `undefined` and render as
    "[undefined]", as in DS4."""
    definition = {key: tool.get(key, UNDEFINED) for key in ("name", "description", "parameters")}
    return text_tokens(stable_stringify(definition)) + TOOL_DEFINITION_WRAPPER_TOKENS


def fixed_tokens(system_prompt: str | None, tools: Sequence[Mapping[str, Any]]) -> int:
    """`fixedTokens = systemTokens + toolTokens` (spec §1.3): the tokens every request pays
    before any message."""
    return system_prompt_tokens(system_prompt) + sum(tool_tokens(t) for t in tools)


class CharsV1Estimator:
    """The `chars-v1` estimator as an `Estimator` object (DS4's default `CHARS_ESTIMATOR`)."""

    name = "chars-v1"

    def message_tokens(self, msg: Any) -> int:
        """`chars-v1` tokens of one message; see `ds4core.estimate.message_tokens`."""
        return message_tokens(msg)

    def __repr__(self) -> str:
        return "CharsV1Estimator()"


CHARS_V1: Estimator = CharsV1Estimator()
"""The shared `chars-v1` estimator instance."""
