"""Conform a parsed Pi entry to the field types Pi writes, before anything computes on it.

Valid JSON is not a valid entry: `"text": 12345`, `"content": 1.5`, a tool call `"id": {...}`,
`"input": 2**70`, `"timestamp": 1e308` or a lone surrogate `"\\ud800"` parse fine and then break
whatever adds, hashes, joins, encodes or converts them. This module is the one gate between the
reader and the engine: every field the engine reads is checked against the type Pi's own
writer gives it (Pi session format §5, pi-ai `types.ts`: `TextContent.text: string`,
`ToolCall.id: string`, `Usage` numbers, `timestamp` in Unix ms), and a field of the wrong type
is replaced by a neutral value of the right type (a string, 0, or dropped when optional), with
one counted diagnostic per entry. Fields of the right type are never touched and an entry that
conforms is returned as the same object (no copy, so a real session reads exactly as before).

Rules (the `_fix_*` functions):

- strings (`text`, `thinking`, `summary`, ids, names, roles, …): a number or boolean becomes its
  JSON text (`12345` → `"12345"`), anything else (object, array, null) is dropped (`text`,
  `thinking`, `content`, `summary` become `""`);
- message `content`: a string or an array; other values become `""`; array items that are not
  objects are dropped;
- numbers (usage counts, costs, `tokensBefore`, `exitCode`, `timestamp`): finite, not a boolean,
  with magnitude at most 2**53 (JavaScript's safe integers); usage counts also >= 0. Others
  become 0 (usage, cost) or are dropped (timestamp, tokensBefore, exitCode);
  `timestamp` must be a JavaScript date (|ms| <= 8.64e15) and is also dropped when outside it;
- `arguments` of a tool call: an object, else `{}`;
- strings with lone surrogates (valid JSON escapes, not encodable as UTF-8) get U+FFFD in their
  place, as a UTF-8 encoder would (only looked for when the line contains a `\\uD8..` escape).
"""

from __future__ import annotations

import math
import re
from typing import Any

MAX_SAFE = 2**53
"""JavaScript's Number.MAX_SAFE_INTEGER + 1: counts beyond it are not exact in Pi either."""
MAX_DATE_MS = 8.64e15
"""The largest JavaScript Date in Unix milliseconds (ECMAScript §21.4.1.1)."""

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]", re.ASCII)
_SURROGATE = re.compile("[\ud800-\udfff]")

_STR_FIELDS_ENTRY = ("firstKeptEntryId", "fromId", "customType", "provider", "modelId", "thinkingLevel")
_STR_FIELDS_MESSAGE = ("role", "provider", "model", "api", "stopReason", "errorMessage", "toolCallId", "toolName",
                       "command", "output", "customType", "fullOutputPath")
_STR_FIELDS_BLOCK = ("type", "id", "name", "mimeType", "data")
_USAGE_FIELDS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens", "cacheWrite1h")
"""pi-ai `Usage` counts (`cacheWrite1h`: the part of `cacheWrite` with 1-hour retention, priced apart;
issue 30: `1e308` there reached the pricing unchecked)."""
_COST_FIELDS = ("input", "output", "cacheRead", "cacheWrite", "total")
"""pi-ai `Usage.cost` numbers (other keys, e.g. `totalFromProvider: true`, are kept as they are)."""


def has_surrogate_escape(raw: bytes) -> bool:
    """True when the JSON text `raw` holds a `\\uD800`–`\\uDFFF` escape (possibly lone)."""
    return _SURROGATE_ESCAPE.search(raw) is not None


def conform_entry(obj: dict[str, Any], surrogates: bool = False) -> tuple[dict[str, Any], list[str]]:
    """`obj` with every wrong-typed field replaced (see the module rules), and what was fixed
    (`["message.content: float"]`, empty when `obj` conforms; then `obj` itself is returned).
    `surrogates`: also replace lone surrogates in every string (see `has_surrogate_escape`)."""
    if not surrogates and _conforms(obj):
        return obj, []
    fixes: list[str] = []
    if surrogates:
        obj = _clean_surrogates(obj, fixes, "entry")
    out = obj
    for key in _STR_FIELDS_ENTRY:
        out = _fix_str(out, key, fixes, "")
    for key in ("summary",):
        out = _fix_str(out, key, fixes, "", default="")
    out = _fix_number(out, "tokensBefore", fixes, "")
    if "content" in out:  # custom_message
        out = _fix_content(out, fixes, "")
    if "usage" in out:
        out = _fix_usage(out, fixes, "")
    for key in ("message", "systemMessage"):
        if key in out:
            value = out[key]
            if isinstance(value, dict):
                fixed = _fix_message(value, fixes, f"{key}.")
                if fixed is not value:
                    out = _with(out, obj, key, fixed)
            else:
                fixes.append(f"{key}: {_kind(value)}")
                out = _without(out, obj, key)
    if "details" in out and isinstance(out["details"], dict):
        details = out["details"]
        for key in ("readFiles", "modifiedFiles"):
            files = details.get(key)
            if key in details and not (isinstance(files, list) and all(isinstance(f, str) for f in files)):
                fixes.append(f"details.{key}: {_kind(files)}")
                details = {**details, key: [f for f in files if isinstance(f, str)] if isinstance(files, list) else []}
        if details is not out["details"]:
            out = _with(out, obj, "details", details)
    return out, fixes


def _conforms(obj: dict[str, Any]) -> bool:
    """True only when `conform_entry(obj)` would change nothing (the common case, decided in a
    few C-level set operations and type checks: issue 14). False means "not sure": the caller
    runs the rule-by-rule path. Checks exactly the fields `conform_entry` checks, with exact
    types (`type(v) is str`; JSON gives no subclasses), never more leniently: one check per
    field (`_ENTRY_CHECKS`, `_MESSAGE_CHECKS`), the same function where the entry and its
    message share a rule."""
    for key in obj.keys() & _ENTRY_CHECKS.keys():
        if not _ENTRY_CHECKS[key](obj[key]):
            return False
    return True


def _message_conforms(message: dict[str, Any]) -> bool:
    """`_conforms` for a message (`conform_entry`'s `_fix_message` rules)."""
    for key in message.keys() & _MESSAGE_CHECKS.keys():
        if not _MESSAGE_CHECKS[key](message[key]):
            return False
    return True


def _optional_str(value: Any) -> bool:
    return value is None or type(value) is str


def _is_str(value: Any) -> bool:
    return type(value) is str


def _optional_number(value: Any) -> bool:
    return value is None or _number_conforms(value)


def _message_value(value: Any) -> bool:
    return type(value) is dict and _message_conforms(value)


def _timestamp(value: Any) -> bool:
    return value is None or type(value) is str or (_number_conforms(value) and abs(value) <= MAX_DATE_MS)


def _details(value: Any) -> bool:
    if type(value) is not dict:
        return True  # only a dict's file lists are checked
    for files_key in value.keys() & {"readFiles", "modifiedFiles"}:
        files = value[files_key]
        if type(files) is not list or not all(type(f) is str for f in files):
            return False
    return True


def _content_conforms(content: Any) -> bool:
    if content is None or type(content) is str:
        return True
    if type(content) is not list:
        return False
    for block in content:
        if type(block) is not dict:
            return False
        for key in block.keys() & _BLOCK_CHECKED:
            value = block[key]
            if key in _BLOCK_STR:
                if value is not None and type(value) is not str:
                    return False
            elif key == "arguments":
                if type(value) is not dict:
                    return False
            elif type(value) is not str:  # text, thinking
                return False
    return True


def _usage_conforms(usage: Any) -> bool:
    if type(usage) is not dict:
        return False
    for key in usage.keys() & _USAGE_SET:
        value = usage[key]
        if not _number_conforms(value) or value < 0:
            return False
    if "cost" in usage:
        cost = usage["cost"]
        if type(cost) is not dict:
            return False
        for key in cost.keys() & _COST_SET:
            if not _number_conforms(cost[key]):
                return False
    return True


_SHARED_CHECKS: dict[str, Any] = {"summary": _is_str, "content": _content_conforms, "usage": _usage_conforms}
_ENTRY_CHECKS: dict[str, Any] = {
    **{key: _optional_str for key in _STR_FIELDS_ENTRY},
    **_SHARED_CHECKS,
    "tokensBefore": _optional_number,
    "message": _message_value,
    "systemMessage": _message_value,
    "details": _details,
}
"""The entry fields `conform_entry` checks, each with its exact-type check."""
_MESSAGE_CHECKS: dict[str, Any] = {
    **{key: _optional_str for key in _STR_FIELDS_MESSAGE},
    **_SHARED_CHECKS,
    "timestamp": _timestamp,
    "exitCode": _optional_number,
}
"""The message fields `_fix_message` checks, each with its exact-type check."""
_BLOCK_STR = frozenset(_STR_FIELDS_BLOCK)
_BLOCK_CHECKED = _BLOCK_STR | {"text", "thinking", "arguments"}
_USAGE_SET = frozenset(_USAGE_FIELDS)
_COST_SET = frozenset(_COST_FIELDS)


def _number_conforms(value: Any) -> bool:
    """`_number_ok` for exact JSON types (NaN and infinities fail the bound)."""
    kind = type(value)
    return (kind is int or kind is float) and abs(value) <= MAX_SAFE


def _fix_message(message: dict[str, Any], fixes: list[str], where: str) -> dict[str, Any]:
    out = message
    for key in _STR_FIELDS_MESSAGE:
        out = _fix_str(out, key, fixes, where)
    out = _fix_str(out, "summary", fixes, where, default="")
    out = _fix_number(out, "exitCode", fixes, where)
    out = _fix_timestamp(out, fixes, where)
    if "content" in out:
        out = _fix_content(out, fixes, where)
    if "usage" in out:
        out = _fix_usage(out, fixes, where)
    return out


def _fix_content(holder: dict[str, Any], fixes: list[str], where: str) -> dict[str, Any]:
    content = holder["content"]
    if content is None or isinstance(content, str):  # null: Pi's builder makes it "" / [] itself
        return holder
    if not isinstance(content, list):
        fixes.append(f"{where}content: {_kind(content)}")
        return {**holder, "content": _as_text(content)}
    blocks: list[Any] = []
    changed = False
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            fixes.append(f"{where}content[{index}]: {_kind(block)}")
            changed = True
            continue
        fixed = block
        for key in _STR_FIELDS_BLOCK:
            fixed = _fix_str(fixed, key, fixes, f"{where}content[{index}].")
        for key in ("text", "thinking"):
            fixed = _fix_str(fixed, key, fixes, f"{where}content[{index}].", default="")
        if "arguments" in fixed and not isinstance(fixed["arguments"], dict):
            fixes.append(f"{where}content[{index}].arguments: {_kind(fixed['arguments'])}")
            fixed = {**fixed, "arguments": {}}
        changed = changed or fixed is not block
        blocks.append(fixed)
    return {**holder, "content": blocks} if changed else holder


def _fix_usage(holder: dict[str, Any], fixes: list[str], where: str) -> dict[str, Any]:
    usage = holder["usage"]
    if not isinstance(usage, dict):
        fixes.append(f"{where}usage: {_kind(usage)}")
        return {k: v for k, v in holder.items() if k != "usage"}
    fixed = usage
    for key in _USAGE_FIELDS:
        if key in fixed and not _count_ok(fixed[key]):
            fixes.append(f"{where}usage.{key}: {_kind(fixed[key])}")
            fixed = {**fixed, key: 0}
    cost = fixed.get("cost")
    if "cost" in fixed:
        if not isinstance(cost, dict):
            fixes.append(f"{where}usage.cost: {_kind(cost)}")
            fixed = {k: v for k, v in fixed.items() if k != "cost"}
        else:
            bad = [k for k, v in cost.items() if k in _COST_FIELDS and not _number_ok(v)]
            if bad:
                fixes.extend(f"{where}usage.cost.{k}: {_kind(cost[k])}" for k in bad)
                fixed = {**fixed, "cost": {k: (0 if k in bad else v) for k, v in cost.items()}}
    return holder if fixed is usage else {**holder, "usage": fixed}


def _fix_str(holder: dict[str, Any], key: str, fixes: list[str], where: str, default: str | None = None) -> dict[str, Any]:
    if key not in holder:
        return holder
    value = holder[key]
    if isinstance(value, str) or (value is None and default is None):
        return holder
    fixes.append(f"{where}{key}: {_kind(value)}")
    if isinstance(value, (bool, int)) or (isinstance(value, float) and math.isfinite(value)):
        return {**holder, key: _as_text(value)}
    if default is None:
        return {k: v for k, v in holder.items() if k != key}
    return {**holder, key: default}


def _fix_number(holder: dict[str, Any], key: str, fixes: list[str], where: str) -> dict[str, Any]:
    if key in holder and holder[key] is not None and not _number_ok(holder[key]):
        fixes.append(f"{where}{key}: {_kind(holder[key])}")
        return {k: v for k, v in holder.items() if k != key}
    return holder


def _fix_timestamp(holder: dict[str, Any], fixes: list[str], where: str) -> dict[str, Any]:
    value = holder.get("timestamp")
    if value is None or isinstance(value, str):
        return holder
    if _number_ok(value) and abs(value) <= MAX_DATE_MS:
        return holder
    fixes.append(f"{where}timestamp: {_kind(value)}")
    return {k: v for k, v in holder.items() if k != "timestamp"}


def _number_ok(value: Any) -> bool:
    return (
        isinstance(value, (int, float)) and not isinstance(value, bool)
        and (math.isfinite(value) if isinstance(value, float) else True) and abs(value) <= MAX_SAFE
    )


def _count_ok(value: Any) -> bool:
    return _number_ok(value) and value >= 0


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) and abs(value) <= 10**30:
        return repr(value) if isinstance(value, float) else str(value)
    return ""


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if abs(value) <= MAX_SAFE else "integer beyond 2**53"
    if isinstance(value, float):
        return "number" if math.isfinite(value) else "non-finite number"
    return {dict: "object", list: "array", str: "string", type(None): "null"}.get(type(value), type(value).__name__)


def _with(out: dict[str, Any], original: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    return {**out, key: value}


def _without(out: dict[str, Any], original: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in out.items() if k != key}


def _clean_surrogates(value: Any, fixes: list[str], where: str) -> Any:
    """`value` with lone surrogates in every string (keys too) replaced by U+FFFD (depth is
    bounded by the reader's `MAX_DEPTH` check before parsing)."""
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value
        if not fixes or fixes[-1] != "lone surrogate":
            fixes.append("lone surrogate")
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_clean_surrogates(k, fixes, where): _clean_surrogates(v, fixes, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_surrogates(v, fixes, where) for v in value]
    return value
