"""Gemini CLI's categories, in the words of the Gemini API and the CLI: what one
`generateContent` request carries (`systemInstruction`, `tools[].functionDeclarations`,
`contents` of `user` and `model` parts: text, `inlineData`, `functionCall`, `functionResponse`),
the CLI's `<session_context>` message and its compression's `<state_snapshot>`; thoughts listed
beside the context (recorded and billed, never sent again: geminiChat.ts strips thought parts), and
the room past the compression threshold drawn as reserved space, as Claude Code's autocompact
buffer is."""

from __future__ import annotations

import json
from typing import Any, Mapping

from ds4core.categories import CATEGORIES, CategoryTable, Part

#: Gemini CLI's categories: ids, labels in display order, colour roles.
GEMINI_TABLE = CategoryTable(
    labels={
        "system_instruction": "System instruction",
        "tool_declarations": "Tool declarations",
        "session_context": "Session context",
        "state_snapshot": "State snapshot",
        "user": "User text",
        "model_text": "Model text",
        "function_calls": "Function calls",
        "function_responses": "Function responses",
        "images": "Images (inline data)",
        "other": "Other parts",
        "thoughts": "Thoughts (not sent again)",
        "unattributed": CATEGORIES["unattributed"],
        "compression_reserve": "Compression buffer",
        "free": CATEGORIES["free"],
    },
    roles={
        "system_instruction": "system_prompt", "tool_declarations": "tools", "session_context": "environment",
        "state_snapshot": "compaction", "model_text": "assistant_text", "function_calls": "tool_calls",
        "function_responses": "tool_results", "thoughts": "thinking", "compression_reserve": "reserved",
    },
    reserved=("compression_reserve",),
    aside=("thoughts",),
)


def _js(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _blocks(content: Any, category: str, child: str | None) -> list[Part]:
    if isinstance(content, str):
        return [(category, child, content)]
    parts: list[Part] = []
    for block in content or ():
        if not isinstance(block, Mapping):
            parts.append((category, child, _js(block)))
        elif block.get("type") == "image":
            parts.append(("images", child or "user", block))
        elif isinstance(block.get("text"), str):
            parts.append((category, child, block["text"]))
        else:
            parts.append((category, child, _js(block)))
    return parts


def gemini_parts(message: Mapping[str, Any]) -> list[Part]:
    """Split one message of a Gemini conversation (`reader.convert`'s Pi-shaped messages) into
    `(category, child, payload)` parts of `GEMINI_TABLE`, as `ds4core.categories.message_parts`
    does for Pi: a function call is its name and JSON arguments (child: the function), a function
    response its text (child: the function), an image its block (child: who sent it)."""
    role = message.get("role")
    special = message.get("ds4Category")
    if role == "custom":
        return _blocks(message.get("content"), str(special or "other"), None) or [(str(special or "other"), None, "")]
    if role == "compactionSummary":
        return [("state_snapshot", None, str(message.get("summary", "")))]
    if role == "user":
        return _blocks(message.get("content"), "user", None) or [("user", None, "")]
    if role == "toolResult":
        name = message.get("toolName") if isinstance(message.get("toolName"), str) else "?"
        return _blocks(message.get("content"), "function_responses", name) or [("function_responses", name, "")]
    if role == "assistant":
        parts: list[Part] = []
        text_category = "state_snapshot" if special == "state_snapshot" else "model_text"
        for block in message.get("content") or ():
            if not isinstance(block, Mapping):
                parts.append(("other", None, _js(block)))
            elif block.get("type") == "toolCall":
                name = block.get("name") if isinstance(block.get("name"), str) else "?"
                parts.append(("function_calls", name, name + _js(block.get("arguments"))))
            elif block.get("type") == "text":
                parts.append((text_category, None, str(block.get("text", ""))))
            else:
                parts.append(("other", None, _js(block)))
        return parts or [("model_text", None, "")]
    return []
