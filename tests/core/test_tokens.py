"""Token counters (chars-v1, offline cl100k) and the content-hash ledger."""

from __future__ import annotations

import base64
import struct
import zlib

from ds4core.categories import message_parts
from ds4core.tokens import CharsV1Counter, Cl100kCounter, TokenLedger, image_dimensions, image_tokens


def _png(width: int, height: int) -> str:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    raw = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))
    return base64.b64encode(raw).decode()


def test_cl100k_counts_offline() -> None:
    counter = Cl100kCounter()
    assert counter.text("hello world") == 2
    assert counter.text("") == 0
    # Special-token text is ordinary text here (never an error, never a special token).
    assert counter.text("<|endoftext|>") > 1


def test_chars_v1_counts_utf16_code_units() -> None:
    counter = CharsV1Counter()
    assert counter.text("abcd") == 1
    assert counter.text("abcde") == 2
    assert counter.text("😀😀") == 1  # two surrogate pairs = 4 code units


def test_image_tokens_from_png_header() -> None:
    block = {"type": "image", "mimeType": "image/png", "data": _png(750, 100)}
    assert image_dimensions(block) == (750, 100)
    assert image_tokens(block) == 100
    big = {"type": "image", "mimeType": "image/png", "data": _png(4000, 4000)}
    assert image_tokens(big) == 1600
    assert image_tokens({"type": "image", "data": "not base64!"}) == 1600


def test_ledger_counts_each_content_once() -> None:
    ledger = TokenLedger(Cl100kCounter(), message_parts)
    a = {"role": "user", "content": "hello world"}
    b = {"role": "user", "content": "hello world"}  # same content, other object
    c = {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    assert ledger.count(a).total == 2 + 4
    assert ledger.count(b).total == 6
    assert ledger.count(a).total == 6
    assert ledger.counted == 1
    assert ledger.count(c).parts[0].category == "assistant_text"
    assert ledger.counted == 2


def test_cl100k_counts_huge_texts_in_chunks() -> None:
    counter = Cl100kCounter()
    words = "alpha beta gamma delta\n" * 20_000  # 460 kB of ordinary text
    chunked = counter.text(words)
    whole = len(counter._encoding.encode_ordinary(words))
    assert abs(chunked - whole) <= whole // 1000  # boundary effects only
    giant = "x" * 2_000_000  # one 2 MB "word": BPE would be quadratic if it were encoded whole
    assert counter.text(giant) == sum(len(counter._encoding.encode_ordinary("x" * 64_000)) for _ in range(31)) + len(
        counter._encoding.encode_ordinary("x" * (2_000_000 - 31 * 64_000))
    )
