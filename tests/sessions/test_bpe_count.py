"""cl100k counted in C (`_cprep.bpe_count`, `_cprep.use_cl100k`; issue 14): the counts equal
tiktoken's `len(encode_ordinary(text))` on every text of every shared sample, on generated
texts built from the pattern's edge cases (contractions in any case, whitespace runs with and
without line ends, digits, punctuation followed by line ends, control characters), on texts
mixing ASCII lines with other characters (those lines counted by tiktoken) and on long pieces
that take many merges; what it does not count (an over-long piece; anything not ASCII without
tiktoken at hand) is left to tiktoken; an encoding with another pattern or without ranks is not
used; and a whole read counts the same with and without it."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4core.tokens import Cl100kCounter
from ds4sessions.agents.pi import slim
from tests.sessions.test_slim_blocks import SHARED, sample_files

needs_c = pytest.mark.skipif(slim._cprep is None, reason="the C extension _cprep is not built (no C compiler at install)")

_ENCODING = Cl100kCounter()._encoding


@pytest.fixture
def ranks() -> Iterator[Any]:
    """The C module with cl100k's ranks loaded (as a preparer loads them), unloaded after."""
    assert slim._cprep.use_cl100k(_ENCODING) is True
    yield slim._cprep
    slim._cprep.set_cl100k_ranks(None)


def _tiktoken(text: str) -> int:
    return len(_ENCODING.encode_ordinary(text))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@needs_c
def test_equal_to_tiktoken_on_every_sample_text(ranks: Any, tmp_path: Path) -> None:
    texts: set[str] = set()
    files = list(sample_files(tmp_path, large=True))
    if SHARED is not None:
        files += sorted((SHARED / "sessions-claude").rglob("*.jsonl")) + sorted((SHARED / "sessions-codex").rglob("*.jsonl"))
    for path in files:
        for line in path.read_text("utf-8", errors="replace").splitlines():
            texts.add(line)
            try:
                texts.update(_strings(json.loads(line)))
            except ValueError:
                pass
    counted = [t for t in texts if ranks.bpe_count(t) is not None]
    assert len(counted) >= 500 and sum(map(len, counted)) >= 100_000
    wrong = [t[:80] for t in counted if ranks.bpe_count(t) != _tiktoken(t)]
    assert wrong == []
    assert all(ranks.bpe_count(t) is None for t in texts if not t.isascii())  # (without `encode`)
    mixed = [f"{t}\n\u00e9\n{t}" for t in counted[:300]] + [t for t in texts if not t.isascii()]
    wrong = [t[:80] for t in mixed if ranks.bpe_count(t, _ENCODING.encode_ordinary) != _tiktoken(t)]
    assert wrong == []


_PARTS = [" ", "  ", "\n", "\r", "\r\n", "\t", "\x0b", "\x0c", "\x1c", "\x00", "\x7f", "'", "'s", "'S", "'ll", "'LL",
          "'Ve", "'rE", "'t", "'D", "'m", "'x", "'l", ".", ",", "!", "(", "{", "_", "-", "#", "a", "Z", "hello", "World",
          "ing", "x", "1", "12", "123", "1234", "0", " 1", " a", " .", "\n\n", "  \n", " \n ", "'\n", ".\n", "  a"]


@needs_c
@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_PARTS), min_size=0, max_size=30), st.integers(1, 4))
def test_equal_to_tiktoken_on_generated_texts(parts: list[str], repeat: int) -> None:
    slim._cprep.use_cl100k(_ENCODING)
    text = "".join(parts) * repeat
    assert slim._cprep.bpe_count(text) == _tiktoken(text)


_MIXED = [" ", "\n", "\r", "\r\n", "\t", "\u00a0", "\u3000", "\u2028", "\u0085", "\u1680", "\u2003", "\u00e9", "\u65e5\u672c",
          "\u2014", "\u2713", "\U0001f600", "\ud800", "\udc00", "a", "hello", "'s", "'LL", ".", "1", "12", "  ", "\n\n", " \n", "\u03a9",
          "\u00df", "\u01c5", "\u00b2", "\u0663", "\x1c", "\x00", "'", "\u00e9\n", "\n\u00e9", "\n ", ".\n", "x\n"]


@needs_c
@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_MIXED), min_size=0, max_size=40))
def test_text_with_other_characters_counts_as_tiktoken_counts(parts: list[str]) -> None:
    """Lines of ASCII counted here and the others by tiktoken: Unicode whitespace after a line
    end (no cut there), lone surrogates (tiktoken's replacement), letters, digits and symbols
    outside ASCII, line ends of every kind."""
    slim._cprep.use_cl100k(_ENCODING)
    text = "".join(parts)
    assert slim._cprep.bpe_count(text, _ENCODING.encode_ordinary) == _tiktoken(text)


@needs_c
def test_long_pieces_merge_as_tiktoken_merges_and_overlong_ones_are_left_to_it(ranks: Any) -> None:
    rng = random.Random(5)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    for _ in range(3000):
        text = "".join(rng.choice(letters[: rng.randint(2, 52)]) for _ in range(rng.randint(2, 256)))
        assert ranks.bpe_count(text) == _tiktoken(text)
    for n in (99, 100, 101, 255, 256):
        for unit in ("a", "ab", "x1", ".", " ", "\n"):
            text = (unit * n)[:n]
            assert ranks.bpe_count(text) == _tiktoken(text)
    assert ranks.bpe_count("a" * 257) is None and ranks.bpe_count("." * 300) is None
    assert ranks.bpe_count("café") is None and ranks.bpe_count("") == 0


@needs_c
def test_only_cl100k_with_its_ranks_is_used() -> None:
    class Other:
        _pat_str = _ENCODING._pat_str.replace("{1,3}", "{1,4}")
        _mergeable_ranks = _ENCODING._mergeable_ranks

    class Dropped:
        _pat_str = _ENCODING._pat_str
        _mergeable_ranks: dict[bytes, int] = {}

    slim._cprep.set_cl100k_ranks(None)
    assert slim._cprep.use_cl100k(Other()) is False and slim._cprep.use_cl100k(Dropped()) is False
    assert slim._cprep.bpe_count("hello") is None  # (nothing loaded: tiktoken counts)
    assert slim.use_cl100k(_ENCODING) is True and slim._cprep.bpe_count("hello") == 1
    slim._cprep.set_cl100k_ranks(None)


class _WithoutRanks:
    """cl100k without its merge ranks (as `mapjson._load_cl100k_lean` leaves it): tiktoken only."""

    _mergeable_ranks: dict[bytes, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(_ENCODING, name)


@needs_c
def test_a_whole_read_counts_the_same_with_and_without_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`map --json`'s numbers of each sample (cl100k) are those tiktoken alone gives, and the
    counter counts the same texts tokenized (`encodes`)."""
    from ds4sessions.agents.pi.reader import feed_whole_file
    from ds4sessions.agents.pi.live import open_map_snapshot
    from ds4tui.mapdata import dumps_map, map_json

    def read(path: Path) -> tuple[str, int]:
        slim._cprep.set_cl100k_ranks(None)
        reader = slim.SlimReader(path, slim.StandInLedger(Cl100kCounter(), slim.message_parts))
        feed_whole_file(reader, path)
        return dumps_map(map_json(open_map_snapshot(path, exact=True))), reader._ledger.counter.encodes

    loaded = 0
    for path in sample_files(tmp_path, large=True):
        with_c = read(path)
        loaded += slim._cprep.bpe_count("hello") == 1  # (a preparer loaded the ranks: a version-3 file with text)
        with monkeypatch.context() as m:
            m.setattr(Cl100kCounter, "_encoding", property(lambda self: _WithoutRanks()))
            assert read(path) == with_c
            assert slim._cprep.bpe_count("hello") is None
    assert loaded >= 3
    slim._cprep.set_cl100k_ranks(None)


@needs_c
def test_every_contraction_and_apostrophe_word_counts_as_tiktoken_counts(ranks: Any) -> None:
    """`'` followed by every pair of ASCII letters and then a letter, a space or nothing: the
    contractions (`'s`, `'LL`, `'Ve`, ...) split before a following letter, other words do not."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    wrong = []
    for a in letters:
        for b in letters:
            for tail in ("x", "Q", " ", ""):
                for text in (f"'{a}{b}{tail}", f"'{a}{tail}", f"it'{a}{b}{tail} ok"):
                    if ranks.bpe_count(text) != _tiktoken(text):
                        wrong.append(text)
    assert wrong == []


@needs_c
def test_a_text_over_the_chunk_size_counts_as_the_python_counter_counts_it() -> None:
    """A text over `CL100K_CHUNK_CHARS` is counted in C chunk by chunk (cut at the last newline or
    space of each chunk's second half, as `Cl100kCounter.text` cuts it): the same count as the
    Python counter's (tiktoken on each chunk), for ASCII, mixed and cut-less texts."""
    from ds4core.categories import message_parts
    from ds4core.tokens import CL100K_CHUNK_CHARS, TokenLedger

    rng = random.Random(3)
    words = ["def", "x", "=", "1\n", "  ", "return", "caf\u00e9", "\u2014", "\n\n", "'s", "12345", "\t"]
    texts = [
        " ".join(rng.choice(words[:6]) for _ in range(60_000)),  # ASCII
        " ".join(rng.choice(words) for _ in range(60_000)),  # mixed
        "".join(rng.choice("abcdefgh.") for _ in range(3 * CL100K_CHUNK_CHARS)),  # no newline or space: cut at the size
        "x\n" * (CL100K_CHUNK_CHARS // 2 + 7),
        "ab \ncd " * (CL100K_CHUNK_CHARS // 3),  # (a cut at the last newline would split " \n")
    ]
    for text in texts:
        assert len(text) > CL100K_CHUNK_CHARS
        message = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}
        in_c = slim.CountingLedger(Cl100kCounter(digest_above=256))
        assert in_c._count_c is not None
        expected = TokenLedger(Cl100kCounter(digest_above=256), message_parts).count(message)
        assert in_c.count(message) == expected
        assert in_c.counter.encodes == 1


@needs_c
def test_an_ascii_text_with_an_over_long_piece_is_counted_by_tiktoken_once() -> None:
    """The preparer's count of an ASCII text with a piece over 256 bytes is tiktoken's (one encode,
    no second scan), as the Python counter's."""
    from ds4core.categories import message_parts
    from ds4core.tokens import TokenLedger

    slim.use_cl100k(_ENCODING)
    for text in ("x" * 300, "word " * 50 + "q" * 1000 + " end", "1" * 999):
        message = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}
        in_c = slim.CountingLedger(Cl100kCounter(digest_above=256))
        assert in_c.count(message) == TokenLedger(Cl100kCounter(digest_above=256), message_parts).count(message)
        assert in_c.counter.encodes == 1
