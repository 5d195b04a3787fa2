"""Bounds on what one line of a session file may cost, checked on the raw bytes before any JSON
parser sees them (so they hold whatever parser the reader uses: stdlib json, orjson, msgspec).

- `MAX_LINE_BYTES` (32 MiB, `$DS4TUI_MAX_LINE_BYTES`): a longer line is skipped with a
  diagnostic. The tailer and `iter_lines` never hold more than the cap of one line: past it they
  keep only a short head (`OversizedLine`) and count the rest, so a 200 MB line costs the cap, not
  the file. The largest line seen in real Pi sessions is a few MB (a base64 image).
- `MAX_DEPTH` (200 levels of `[`/`{`): a deeper line is skipped with a diagnostic (`json_depth`),
  so no recursive walker of ours and no stdlib parser ever sees it; the one parser that may see
  such a line first is orjson, whose own recursion is bounded (1,024 levels, then an error).
  Real Pi entries nest < 20 levels.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import cache
from itertools import accumulate
from typing import Any, BinaryIO

from orjson import loads as _orjson_loads

SETTING_PROBLEMS: list[str] = []
"""Settings from the environment that could not be used, one sentence each: the commands refuse
to run with them (`ds4tui.errors.run_guarded`: one line, exit 2) rather than read a session
under a cap the user did not ask for."""


def _env_bytes(name: str, default: int, minimum: int) -> int:
    """The whole number of bytes in `$name` (at least `minimum`), else `default`; a value that is
    not one is recorded in `SETTING_PROBLEMS` (and `default` used meanwhile)."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        value = None
    if value is None or value < minimum:
        SETTING_PROBLEMS.append(f"{name}={raw!r} is not a size in bytes (a whole number of at least {minimum:,}; "
                                f"unset, the default is {default:,})")
        return default
    return value


MAX_LINE_BYTES = _env_bytes("DS4TUI_MAX_LINE_BYTES", 32 << 20, 1 << 10)
MAX_DEPTH = 200
HEAD_KEPT = 80
"""Bytes of an oversized line kept for the diagnostic's excerpt."""
READ_CHUNK = 1 << 20


class OversizedLine(bytes):
    """The first `HEAD_KEPT` bytes of a line longer than `MAX_LINE_BYTES`; `length` is the
    line's real length in bytes (without its `\\n`). Passed where a line's bytes go, so the
    `(line_no, offset, raw)` shape of a line stays the same."""

    length: int

    def __new__(cls, head: bytes, length: int) -> OversizedLine:
        self = super().__new__(cls, head[:HEAD_KEPT])
        self.length = length
        return self


def line_length(raw: bytes) -> int:
    """The real length of a line in bytes (an `OversizedLine` counts what was skipped)."""
    return raw.length if isinstance(raw, OversizedLine) else len(raw)


_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_DELTA = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


NOT_PARSED = object()
"""`depth_and_value`'s value when the depth was not measured on a parse of the line."""


def json_depth(raw: bytes, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of the JSON text `raw` (0 for a scalar), counting `[`/`{` outside strings;
    stops counting past `limit` (a result <= `limit` means "not deeper than `limit`"). Never
    recursive in Python.

    Fast path: a line with at most `limit` brackets in total cannot be deeper. A line with more
    (source code, tables in a tool result: a tenth of the lines of a large real session, most of
    its bytes) is measured on its bytes in one C pass when the optional extension is built
    (`_cprep.bytes_depth`, equal to `_bytes_depth`; string contents skipped with `memchr`: the
    first read of 99-large 183 → 133 ms). Without it, such a line is parsed by orjson, whose own
    recursion stops at 1,024 levels with an error, and the depth of the parsed value is walked
    with a stack: it equals the text's depth when the value kept every container of the text
    (checked by counting brackets: a duplicate key drops the earlier value). A line orjson
    cannot parse, or whose value lost a container, is measured on its bytes (`_bytes_depth`:
    strings blanked out, linear in the line)."""
    return depth_and_value(raw, limit)[0]


def depth_and_value(raw: bytes, limit: int = MAX_DEPTH) -> tuple[int, object]:
    """(`json_depth(raw, limit)`, orjson's parse of `raw` when the depth was measured on it,
    else `NOT_PARSED`; with the C scan nothing is parsed here): a reader that would parse the
    line anyway reuses the value instead of parsing a large line twice (the lines with more
    than `limit` brackets are a tenth of a real session's lines and most of its bytes). The
    value is `orjson.loads(raw)`, so it exists only for valid UTF-8 JSON that orjson accepts."""
    opening = raw.count(b"[") + raw.count(b"{")
    if opening <= limit:
        return opening, NOT_PARSED
    scan = _c_bytes_depth()
    if scan is not None:
        # one pass in C over the bytes (strings blanked as `_bytes_depth` does), ~4× faster than
        # parsing the line and walking its value; the reader then parses the line itself
        return scan(raw, limit), NOT_PARSED
    try:
        value = _orjson_loads(raw)
    except ValueError:  # orjson.JSONDecodeError: not JSON, or deeper than orjson's own limit
        return _bytes_depth(raw, limit), NOT_PARSED
    depth, containers, in_strings = _value_shape(value, limit)
    # The parsed value shows the text's depth only if it kept every container of the text: a
    # duplicate key keeps only its last value, and a deep earlier one would hide from the walk
    # (while the stdlib parser, which some readers use, still recurses into it). Every bracket
    # byte of the line is a container or a character of a string; a string's bracket written
    # as a `\u005b`-style escape is not a bracket byte. Escapes are counted generously (an
    # escaped backslash before `u005b` counts too), which can only make the check fail.
    escaped = sum(raw.count(e) for e in _BRACKET_ESCAPES) if b"\\u" in raw else 0
    if containers != opening - (in_strings - escaped):
        return _bytes_depth(raw, limit), NOT_PARSED
    return depth, value


@cache
def _c_bytes_depth() -> Any:
    """`_cprep.bytes_depth` (`_bytes_depth` in one C pass) when the optional extension is built,
    else None. Looked up at the first deep line: `ds4sessions.agents.pi` imports this module."""
    try:
        from ds4sessions.agents.pi._cprep import bytes_depth
    except ImportError:
        return None
    return bytes_depth


_BRACKET_ESCAPES = (b"\\u005b", b"\\u005B", b"\\u007b", b"\\u007B")
"""JSON escapes of `[` and `{` (`\\u005b`, `\\u007b`, either case of the hex digit)."""


def _value_shape(value: object, limit: int) -> tuple[int, int, int]:
    """(depth, containers, `[`/`{` characters in its strings and keys) of a parsed JSON value,
    walked with a stack; the depth stops counting past `limit` (the counts go on)."""
    if not isinstance(value, (dict, list)):
        return 0, 0, (value.count("[") + value.count("{")) if isinstance(value, str) else 0
    deepest = 1
    containers = 0
    in_strings = 0
    stack = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        containers += 1
        if depth > deepest:
            deepest = min(depth, limit + 1)
        if isinstance(node, dict):
            for key in node:
                in_strings += key.count("[") + key.count("{")
            children = node.values()
        else:
            children = node
        for child in children:
            if isinstance(child, (dict, list)):
                push((child, depth + 1))
            elif isinstance(child, str):
                in_strings += child.count("[") + child.count("{")
    return deepest, containers, in_strings


def _bytes_depth(raw: bytes, limit: int) -> int:
    """Depth of `raw` counted on its bytes with strings blanked out (see `json_depth`)."""
    # strings out: drop escaped backslashes, then escaped quotes; what is left between quotes is
    # string content (every other piece of a split on '"'). All in C, linear in the line.
    outside = b"".join(raw.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')[::2])
    brackets = outside.translate(None, _NOT_BRACKET)
    deepest = 0
    for depth in accumulate(_DELTA[b] for b in brackets):
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
    return deepest


def line_problem(raw: bytes) -> str | None:
    """Why a line must be skipped before parsing (too long, too deep), or None."""
    return line_problem_and_value(raw)[0]


def line_problem_and_value(raw: bytes) -> tuple[str | None, object]:
    """(`line_problem(raw)`, the line's orjson parse when the depth bound was measured on it,
    else `NOT_PARSED`; see `depth_and_value`)."""
    length = line_length(raw)
    if isinstance(raw, OversizedLine) or length > MAX_LINE_BYTES:
        return f"line of {length:,} bytes is longer than the {MAX_LINE_BYTES:,}-byte cap; skipped", NOT_PARSED
    depth, value = depth_and_value(raw)
    if depth > MAX_DEPTH:
        return f"JSON nested deeper than {MAX_DEPTH} levels; skipped", NOT_PARSED
    return None, value


def iter_lines(f: BinaryIO, cap: int | None = None) -> Iterator[tuple[int, int, bytes, bool]]:
    """Stream the lines of a binary file: (line_no, offset, raw, complete). `raw` excludes the
    `\\n`; the last line may be incomplete (`complete` False). A line longer than `cap` bytes
    (default `MAX_LINE_BYTES`) comes as an `OversizedLine`; memory is bounded by the cap plus one
    read chunk."""
    cap = MAX_LINE_BYTES if cap is None else cap
    line_no = 0
    offset = 0
    parts: list[bytes] = []
    held = 0
    skipped = 0  # bytes of an oversized line not kept
    head = b""
    while chunk := f.read(READ_CHUNK):
        cut = 0
        while True:
            nl = chunk.find(b"\n", cut)
            if nl != -1 and not parts and not skipped and nl - cut <= cap:
                # a whole line inside the chunk (the usual one): nothing held before it
                line_no += 1
                yield line_no, offset, chunk[cut:nl], True
                offset += nl - cut + 1
                cut = nl + 1
                continue
            piece = chunk[cut:] if nl == -1 else chunk[cut:nl]
            if skipped or held + len(piece) > cap:
                if not skipped:
                    head = (b"".join(parts) + piece[:HEAD_KEPT])[:HEAD_KEPT]
                    skipped = held
                    parts, held = [], 0
                skipped += len(piece)
            else:
                parts.append(piece)
                held += len(piece)
            if nl == -1:
                break
            line_no += 1
            if skipped:
                raw: bytes = OversizedLine(head, skipped)
                length = skipped
            else:
                raw = b"".join(parts)
                length = len(raw)
            yield line_no, offset, raw, True
            offset += length + 1
            parts, held, skipped = [], 0, 0
            cut = nl + 1
    if held or skipped:
        raw = OversizedLine(head, skipped) if skipped else b"".join(parts)
        yield line_no + 1, offset, raw, False
