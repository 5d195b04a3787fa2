"""The bundled demo session, shown as if it happened just now.

The packaged file (`ds4tui/data/demo-session.jsonl`, written by scripts/make_demo_session.py)
is never opened for writing: the dashboard always gets a temporary copy (`demo_copy`, or
`replay` for the live `ds4tui demo`), so a pin or a compaction confirmed in the demo appends to
the copy only. The copy's timestamps are shifted so the last request is recent: the prompt
cache shows warm and counts down, as it would in a live session.

Timestamps shifted: an entry's `timestamp` (ISO 8601, UTC, milliseconds, Pi session format
§2) and a message's `timestamp` (epoch milliseconds). Everything else is kept byte-for-byte in
meaning (re-serialised compactly, as Pi's `JSON.stringify` writes it).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from pathlib import Path
from typing import Callable

DEMO_AGE_S = 20.0
"""How long before "now" the demo copy's last entry is dated (seconds): its cache is warm."""


def _parse_time(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def line_time(raw: bytes) -> float | None:
    """The entry timestamp of one JSONL line (epoch seconds), or None (no/invalid JSON or time)."""
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    return _parse_time(entry.get("timestamp")) if isinstance(entry, dict) else None


def shift_line(raw: bytes, offset_s: float) -> bytes:
    """One JSONL line with its entry and message timestamps moved by `offset_s` seconds.
    A line that is not a JSON object (or has no timestamps) comes back unchanged."""
    try:
        entry = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(entry, dict):
        return raw
    changed = False
    when = _parse_time(entry.get("timestamp"))
    if when is not None:
        entry["timestamp"] = _iso(when + offset_s)
        changed = True
    message = entry.get("message")
    if isinstance(message, dict) and isinstance(message.get("timestamp"), (int, float)) and not isinstance(message.get("timestamp"), bool):
        message["timestamp"] = int(round(message["timestamp"] + offset_s * 1000))
        changed = True
    if not changed:
        return raw
    end = b"\n" if raw.endswith(b"\n") else b""
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + end


def demo_copy(source: Path, target: Path, now: float | None = None) -> Path:
    """Write `source` to `target` with every timestamp shifted so the last entry is
    `DEMO_AGE_S` before `now` (epoch seconds, default: the clock). Returns `target`.
    Raises OSError when `source` cannot be read or `target` written."""
    lines = source.read_bytes().splitlines(keepends=True)
    times = [t for t in (line_time(raw) for raw in lines) if t is not None]
    offset = ((now if now is not None else time.time()) - DEMO_AGE_S - max(times)) if times else 0.0
    target.write_bytes(b"".join(shift_line(raw, offset) for raw in lines))
    return target


def replay(
    source: Path,
    target: Path,
    speed: float,
    stop: threading.Event,
    now: Callable[[], float] = time.time,
) -> None:
    """Append `source`'s lines to `target` one by one, waiting the recorded gap between entries
    divided by `speed` (at most 2 s per step), each line dated when it is written (`now()`), so
    the replay is a live session happening now: the cache is warm and counts down. The header and
    lines without a timestamp are written as they are. Stops early when `stop` is set."""
    lines = source.read_bytes().splitlines(keepends=True)
    prev: float | None = None
    with target.open("ab") as out:
        for raw in lines:
            when = line_time(raw)
            if prev is not None and when is not None and speed > 0:
                if stop.wait(min(max(when - prev, 0) / speed, 2.0)):
                    return
            prev = when if when is not None else prev
            out.write(shift_line(raw, now() - when) if when is not None else raw)
            out.flush()
