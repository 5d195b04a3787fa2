"""The `chars-v1` estimator (spec §1.1-§1.3). Values are DS4's own (spec §1.2 vectors, reproduced
in budgets.json:estimate-message-shapes) or counted by hand from JavaScript's JSON.stringify."""

from __future__ import annotations

import pytest

from ds4core.estimate import (
    CHARS_V1,
    CharsV1Estimator,
    Estimator,
    fixed_tokens,
    message_tokens,
    messages_tokens,
    system_prompt_tokens,
    text_tokens,
    tool_tokens,
)

USER_HELLO = {"role": "user", "content": "hello"}
ASSISTANT_THINKING_TOOLCALL = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "check the file"},
        {"type": "toolCall", "id": "1", "name": "read", "arguments": {"path": "a.ts"}},
    ],
}
TOOL_RESULT_WITH_IMAGE = {
    "role": "toolResult",
    "toolName": "read",
    "content": [
        {"type": "text", "text": "file contents"},
        {"type": "image", "data": "ignored", "mimeType": "image/png"},
    ],
}


def test_spec_vectors_always_run() -> None:
    """Spec §1.2: 11, 28 and 1048 (runs without ../shared)."""
    assert message_tokens(USER_HELLO) == 11
    assert message_tokens(ASSISTANT_THINKING_TOOLCALL) == 28
    assert message_tokens(TOOL_RESULT_WITH_IMAGE) == 1048
    assert messages_tokens([USER_HELLO, ASSISTANT_THINKING_TOOLCALL, TOOL_RESULT_WITH_IMAGE]) == 1087


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("1234", 1),
        ("12345", 2),
        ("é" * 4, 1),  # one UTF-16 unit each
        ("😀", 1),  # a surrogate pair: 2 units
        ("😀" * 5, 3),  # 10 units, not 5 code points
        ("\ud800", 1),  # a lone surrogate is one unit
    ],
)
def test_text_tokens_count_utf16_code_units(text: str, tokens: int) -> None:
    assert text_tokens(text) == tokens


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        # 8 + role 5 chars (2) + summary 40 chars (10)
        ({"role": "compactionSummary", "summary": "summary text of 40 characters exactly.."}, 23),
        # 8 + "bashExecution" (4) + "npm test" (2) + "ok" (1)
        ({"role": "bashExecution", "command": "npm test", "output": "ok"}, 15),
        # not an object: JSON '"a bare string"' is 15 chars -> 4, + 8
        ("a bare string", 12),
        (None, 9),  # "null"
        (["x"], 10),  # '["x"]'
        # content present but null: JSON "null" (1); role "user" (1)
        ({"role": "user", "content": None}, 10),
        # no content key at all: nothing for content
        ({"role": "user"}, 9),
        # non-array content: '{"nested":true}' (15 chars -> 4); "custom" (2)
        ({"role": "custom", "content": {"nested": True}}, 14),
        # unknown block: '{"type":"redacted","data":"x"}' (30 -> 8) + 4; "assistant" (3)
        ({"role": "assistant", "content": [{"type": "redacted", "data": "x"}]}, 23),
        # a non-object block costs its JSON without the +4 wrapper: '"hi"' -> 1
        ({"role": "user", "content": ["hi"]}, 10),
        # a text block whose text is not a string is costed as a whole object:
        # '{"type":"text","text":5}' (24 -> 6) + 4
        ({"role": "user", "content": [{"type": "text", "text": 5}]}, 19),
        # toolCall without arguments: JSON(undefined) is "" -> "read" (1) + 4
        ({"role": "assistant", "content": [{"type": "toolCall", "name": "read"}]}, 16),
        # toolCall arguments in JavaScript key order: '{"1":0,"b":0}' -> "ab" + 13 chars (4) + 4
        (
            {"role": "assistant", "content": [{"type": "toolCall", "name": "ab", "arguments": {"b": 0, "1": 0}}]},
            19,
        ),
        # a role that is not a string is not charged
        ({"role": 7, "content": "abcd"}, 9),
    ],
)
def test_message_shapes(message: object, tokens: int) -> None:
    assert message_tokens(message) == tokens


def test_fixed_tokens_system_prompt_and_tools() -> None:
    # "You are helpful." is 16 chars -> 4, + 8 wrapper
    assert system_prompt_tokens("You are helpful.") == 12
    assert system_prompt_tokens("") == 0
    assert system_prompt_tokens(None) == 0
    read = {
        "name": "read",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {}},
    }
    # '{"description":"Read a file","name":"read","parameters":{"properties":{},"type":"object"}}'
    # is 90 chars -> 23, + 12
    assert tool_tokens(read) == 35
    # missing fields stringify as "[undefined]":
    # '{"description":"[undefined]","name":"x","parameters":"[undefined]"}' (67 -> 17) + 12
    assert tool_tokens({"name": "x"}) == 29
    assert fixed_tokens("You are helpful.", [read, {"name": "x"}]) == 12 + 35 + 29
    assert fixed_tokens(None, []) == 0


def test_estimator_protocol() -> None:
    assert isinstance(CHARS_V1, Estimator)
    assert isinstance(CHARS_V1, CharsV1Estimator)
    assert CHARS_V1.name == "chars-v1"
    assert CHARS_V1.message_tokens(USER_HELLO) == 11
