"""`ds4core.jsjson` against JavaScript's own outputs (Node `JSON.stringify`, `String(n)`,
`s.length`, `Math.round`) on the values that differ from Python's json module."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4core.jsjson import _stringify_exact  # the reference for the fast path
from ds4core.jsjson import (
    UNDEFINED,
    js_property_order,
    number_to_string,
    round6,
    stable_stringify,
    stringify,
    utf16_len,
)


@pytest.mark.parametrize(
    ("value", "js"),
    [
        (1.0, "1"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (0.1 + 0.2, "0.30000000000000004"),
        (100.0, "100"),
        (1.5, "1.5"),
        (1e20, "100000000000000000000"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e21, "1e+21"),
        (1.5e300, "1.5e+300"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (0.000001, "0.000001"),
        (1e-7, "1e-7"),
        (1.23e-18, "1.23e-18"),
        (5e-324, "5e-324"),
        (-2.5e-8, "-2.5e-8"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
    ],
)
def test_number_to_string(value: float, js: str) -> None:
    assert number_to_string(value) == js


@pytest.mark.parametrize(
    ("value", "js"),
    [
        (1.0, "1"),
        (7, "7"),
        (2**53 + 1, "9007199254740992"),  # a double, as JSON.parse would have made it
        (10**21, "1e+21"),
        (math.nan, "null"),
        (math.inf, "null"),
        (True, "true"),
        (None, "null"),
        ("", '""'),
        ("é中😀", '"é中😀"'),  # non-ASCII kept as-is
        ("\u2028\u2029\x7f", '"\u2028\u2029\x7f"'),  # JSON.stringify leaves these alone
        ('\x00\x1f\b\f\n\r\t"\\/', '"\\u0000\\u001f\\b\\f\\n\\r\\t\\"\\\\/"'),
        ("\ud800", '"\\ud800"'),  # lone high surrogate (ES2019 well-formed stringify)
        ("a\udc00b", '"a\\udc00b"'),  # lone low surrogate
        ("\ud83d\ude00", '"\ud83d\ude00"'),  # a surrogate pair stays a pair
        ("\udc00\ud800", '"\\udc00\\ud800"'),  # reversed: both lone
        ([], "[]"),
        ({}, "{}"),
        ({"a": [1, {"b": [True, False, None]}], "c": "x"}, '{"a":[1,{"b":[true,false,null]}],"c":"x"}'),
        ((1, 2.5), "[1,2.5]"),
        # undefined: dropped from objects, null in arrays
        ({"a": UNDEFINED}, "{}"),
        ({"a": UNDEFINED, "b": 1}, '{"b":1}'),
        ({"b": 1, "a": UNDEFINED}, '{"b":1}'),
        ([UNDEFINED, len], "[null,null]"),
        ({"f": len}, "{}"),
        # JavaScript property order: array-index keys ascending first, then insertion order
        ({"b": 1, "2": 2, "1": 3, "01": 4, "-1": 5}, '{"1":3,"2":2,"b":1,"01":4,"-1":5}'),
        ({"x": 0, "4294967295": 1, "4294967294": 2}, '{"4294967294":2,"x":0,"4294967295":1}'),
        ({1: "int key"}, '{"1":"int key"}'),
    ],
)
def test_stringify(value: object, js: str) -> None:
    assert stringify(value) == js


def test_stringify_top_level_undefined() -> None:
    assert stringify(UNDEFINED) is None
    assert stringify(len) is None
    assert not UNDEFINED
    assert repr(UNDEFINED) == "UNDEFINED"


def test_stringify_rejects_non_json_values() -> None:
    with pytest.raises(TypeError):
        stringify({1, 2})
    with pytest.raises(TypeError):
        stringify(b"bytes")


def test_js_property_order() -> None:
    assert [k for k, _ in js_property_order({"z": 0, "10": 0, "9": 0})] == ["9", "10", "z"]


@pytest.mark.parametrize(
    ("value", "js"),
    [
        ({"b": 1, "a": {"d": 2, "c": [{"z": 1, "y": 2}]}}, '{"a":{"c":[{"y":2,"z":1}],"d":2},"b":1}'),
        # keys compare by UTF-16 code unit: U+1F600 (0xD83D...) sorts before U+FF61
        ({"\uff61": 1, "\U0001f600": 2}, '{"😀":2,"｡":1}'),
        # array-index keys still come first once put back into an object
        ({"b": 0, "10": 1, "9": 2}, '{"9":2,"10":1,"b":0}'),
        ({"u": UNDEFINED, "f": len, "n": math.nan, "i": -math.inf, "bytes": b"abc"},
         '{"bytes":"[bytes:3]","f":"[function]","i":"-Infinity","n":"NaN","u":"[undefined]"}'),
        ([UNDEFINED, bytearray(2)], '["[undefined]","[bytes:2]"]'),
        (UNDEFINED, '"[undefined]"'),
    ],
)
def test_stable_stringify(value: object, js: str) -> None:
    assert stable_stringify(value) == js


@pytest.mark.parametrize(
    ("text", "length"),
    [("", 0), ("abc", 3), ("é", 1), ("中文", 2), ("😀", 2), ("a😀b", 4), ("\ud800", 1)],
)
def test_utf16_len(text: str, length: int) -> None:
    assert utf16_len(text) == length


@pytest.mark.parametrize(
    ("value", "rounded"),
    [
        (5e-7, 0.000001),  # Python's round() gives 0.0 (banker's rounding)
        (0.1234565, 0.123457),  # Python's round() gives 0.123456
        (1000.833333333, 1000.833333),
        (-2.5e-6, -0.000002),  # halves go towards +infinity
        (1.2, 1.2),
    ],
)
def test_round6_uses_javascript_math_round(value: float, rounded: float) -> None:
    assert round6(value) == rounded


_JSON_KEYS = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["0", "1", "10", "01", "4294967294", "4294967295", "-1", "1.5", "\ud800", "a\udc00"]),
)
_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.sampled_from([2**53 - 1, 2**53, -(2**53) + 1, -(2**53), 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12),
    st.sampled_from(["\ud800", "\udfff", "\ud83d\ude00", "a\ud83d", "\udc00b", "\x00\x1f\x7f\u2028\u2029", "\"\\"]),
)
_JSON_VALUES = st.recursive(
    _JSON_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(_JSON_KEYS, children, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=600, deadline=None)
@given(_JSON_VALUES)
def test_stringify_fast_path_equals_the_rules(value: object) -> None:
    # The C-encoder path (issue 14) must write exactly what the rule-by-rule serialiser writes.
    assert stringify(value) == _stringify_exact(value)
