"""JavaScript-compatible JSON serialisation and string length.

DS4 measures text with JavaScript's `String.prototype.length` (UTF-16 code units) and serialises
with `JSON.stringify`. Token estimates, tool-definition costs and prompt hashes therefore depend on
JavaScript's exact output. This module reproduces it for JSON-shaped Python values:

- `stringify(value)`: `JSON.stringify(value)` with no replacer and no indentation (compact).
- `stable_stringify(value)`: DS4's `stableStringify` (keys sorted recursively, special values
  turned into marker strings), spec §1.3.
- `utf16_len(s)`: `s.length` in JavaScript.
- `number_to_string(x)`: JavaScript's `Number.prototype.toString()` (ECMA-262 Number::toString).

Value mapping (Python -> JavaScript): `dict` -> object, `list`/`tuple` -> array, `str` -> string,
`bool` -> boolean, `int`/`float` -> number (a double), `None` -> null, `UNDEFINED` -> undefined.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

__all__ = [
    "UNDEFINED",
    "js_property_order",
    "js_to_fixed",
    "number_to_string",
    "round6",
    "stable_stringify",
    "stringify",
    "utf16_len",
]

_MAX_SAFE_INTEGER = 2**53 - 1
_MAX_ARRAY_INDEX = 2**32 - 2


class _Undefined:
    """JavaScript's `undefined`; a singleton distinct from `None` (which is JSON `null`)."""

    _instance: _Undefined | None = None

    def __new__(cls) -> _Undefined:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        return False


UNDEFINED: Any = _Undefined()
"""JavaScript `undefined`: omitted as an object member, `null` in an array, no output at top level."""


def utf16_len(s: str) -> int:
    """Length of `s` in UTF-16 code units, as JavaScript `s.length` counts it.

    A character outside the BMP counts 2; a lone surrogate code point counts 1.
    """
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def number_to_string(x: float) -> str:
    """Format a number exactly as JavaScript `String(x)` does (ECMA-262 Number::toString, radix 10).

    Examples: 1.0 -> "1", 0.1 -> "0.1", 1e21 -> "1e+21", 1.5e-7 -> "1.5e-7", -0.0 -> "0",
    nan -> "NaN", inf -> "Infinity". Python's `repr` yields the same shortest round-trip digits
    as JavaScript; only the layout differs.
    """
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    if x < 0:
        return "-" + number_to_string(-x)
    mantissa, _, exp_text = repr(float(x)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    raw = int_part + frac_part
    digits = raw.lstrip("0")
    # value = 0.<digits> * 10**n
    n = len(int_part) + (int(exp_text) if exp_text else 0) - (len(raw) - len(digits))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    e = n - 1
    exponent = ("+" if e >= 0 else "-") + str(abs(e))
    if k == 1:
        return digits + "e" + exponent
    return digits[0] + "." + digits[1:] + "e" + exponent


def js_to_fixed(value: float, digits: int) -> str:
    """JS `Number.prototype.toFixed(digits)`: exact decimal value of the double, ties away from zero.

    Python's `format` rounds exact ties to even (`0.125 -> "0.12"`); JS gives `"0.13"`.
    Like JS, non-finite values and |value| >= 1e21 give `String(value)` (`"NaN"`, `"1e+21"`).
    The one `toFixed` of ds4tui (DS4's cache-policy reasons, retrieval evidence scores).
    """
    if not math.isfinite(value) or abs(value) >= 1e21:
        return number_to_string(value)
    if value == 0:
        value = 0.0  # JS prints -0 as "0"
    quantum = Decimal(1).scaleb(-digits)
    return str(Decimal(value).quantize(quantum, rounding=ROUND_HALF_UP))


def round6(x: float) -> float:
    """`Math.round(x * 1e6) / 1e6`, DS4's 6-decimal rounding, with JavaScript's `Math.round`
    (halves go towards +infinity, unlike Python's `round`)."""
    scaled = x * 1_000_000
    low = math.floor(scaled)
    return (low + 1 if scaled - low >= 0.5 else low) / 1_000_000


def _number_json(x: int | float) -> str:
    if isinstance(x, int):
        if -_MAX_SAFE_INTEGER <= x <= _MAX_SAFE_INTEGER:
            return str(x)
        x = float(x)
    if not math.isfinite(x):
        return "null"
    return number_to_string(x)


_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
# Characters JSON.stringify escapes: `"`, `\`, C0 controls, and lone surrogates (ES2019
# well-formed JSON.stringify). A high surrogate followed by a low one is a valid pair in UTF-16
# and stays as-is; everything else (non-ASCII included) is emitted literally.
_NEEDS_ESCAPE = re.compile(
    '[\\x00-\\x1f"\\\\]|[\\ud800-\\udbff](?![\\udc00-\\udfff])|(?<![\\ud800-\\udbff])[\\udc00-\\udfff]'
)


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group()
    return _ESCAPES.get(ch) or f"\\u{ord(ch):04x}"


def _quote(s: str) -> str:
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, s) + '"'


def _is_array_index(key: str) -> bool:
    return (
        key.isascii()
        and key.isdigit()
        and (key == "0" or key[0] != "0")
        and int(key) <= _MAX_ARRAY_INDEX
    )


def _property_key(key: Any) -> str:
    """`ToPropertyKey` for the key types a Python dict may hold."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, (int, float)):
        return number_to_string(float(key)) if isinstance(key, float) else str(key)
    if key is None:
        return "null"
    raise TypeError(f"unsupported object key type: {type(key).__name__}")


def js_property_order(obj: dict[Any, Any]) -> list[tuple[str, Any]]:
    """Members of `obj` in JavaScript property order: array-index keys ascending, then the rest in
    insertion order (ECMA-262 OrdinaryOwnPropertyKeys). This is the order JSON.parse'd objects
    have in DS4, e.g. `{"b":1,"2":0,"1":0}` iterates as "1", "2", "b".
    """
    items = [(_property_key(k), v) for k, v in obj.items()]
    if not any(_is_array_index(k) for k, _ in items):
        return items
    indices = sorted((kv for kv in items if _is_array_index(kv[0])), key=lambda kv: int(kv[0]))
    return indices + [kv for kv in items if not _is_array_index(kv[0])]


def _serialize(value: Any, out: list[str]) -> bool:
    """Append the JSON text of `value`; return False when JS would produce `undefined`."""
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, (int, float)):
        out.append(_number_json(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key, member in js_property_order(value):
            mark = len(out)
            out.append("" if first else ",")
            out.append(_quote(key))
            out.append(":")
            if _serialize(member, out):
                first = False
            else:
                del out[mark:]
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            if not _serialize(item, out):
                out.append("null")
        out.append("]")
    elif value is UNDEFINED or callable(value):
        return False
    else:
        raise TypeError(f"value of type {type(value).__name__} is not JSON-shaped")
    return True


def stringify(value: Any) -> str | None:
    """`JSON.stringify(value)`: compact JSON text, or None where JavaScript returns `undefined`
    (for `UNDEFINED` or a callable at top level).

    Object members whose value is `UNDEFINED` or callable are omitted; in arrays they become
    `null`. Non-finite numbers become `null`. Integers beyond ±(2**53 − 1) are rounded to a double
    first, as JSON.parse would have done. Raises TypeError for values that are not JSON-shaped
    (e.g. bytes, sets, arbitrary objects); there is no `toJSON` support.
    """
    out: list[str] = []
    if not _serialize(value, out):
        return None
    return "".join(out)


def _utf16_sort_key(key: str) -> bytes:
    # JavaScript's default Array.prototype.sort compares UTF-16 code units; big-endian UTF-16
    # bytes compare the same way.
    return key.encode("utf-16-be", "surrogatepass")


def _stable_normalize(value: Any) -> Any:
    if value is UNDEFINED:
        return "[undefined]"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"[bytes:{len(value)}]"
    if isinstance(value, float) and not math.isfinite(value):
        return number_to_string(value)
    if isinstance(value, (list, tuple)):
        return [_stable_normalize(item) for item in value]
    if isinstance(value, dict):
        members = {_property_key(k): v for k, v in value.items()}
        return {k: _stable_normalize(members[k]) for k in sorted(members, key=_utf16_sort_key)}
    if callable(value):
        return "[function]"
    return value


def stable_stringify(value: Any) -> str:
    """DS4's `stableStringify` (spec §1.3): object keys sorted recursively by UTF-16 code units,
    then `JSON.stringify`.

    Markers: `UNDEFINED` -> "[undefined]", callables -> "[function]", bytes-like -> "[bytes:N]"
    (DS4's `Uint8Array` rule), NaN/±Infinity -> "NaN"/"Infinity"/"-Infinity". Because the sorted
    keys go back into a JavaScript object, array-index keys ("1", "10") still come first in numeric
    order, exactly as in DS4. Python has no bigint, so DS4's "<n>n" rule has no counterpart.
    Raises TypeError for other non-JSON values.
    """
    text = stringify(_stable_normalize(value))
    assert text is not None  # normalisation leaves no undefined or callable
    return text
