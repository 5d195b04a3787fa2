"""Issue 30 item 5: `compact` does not trust the model's reply.

A real HTTP server on 127.0.0.1 answers the summary request with what a broken or hostile
endpoint may send: a list where an object is expected, usage as strings, NaN, 1e308 or 10**30, a
number as the summary text, 100,000-deep nesting, a 400 MB body (with and without a
Content-Length), a summary whose compaction line would pass the reader's 32 MiB line cap. Each
ends in one line (`CompactionFailed`, the CLI's "refused, nothing written"), the session file
byte-identical and nothing in the journal; the big reply is refused while it streams, with the
process's peak memory far below the reply's size.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from ds4sessions.agents.pi import read_session
from ds4sessions.steering.compaction import CompactionFailed, CompactionSettings, Endpoint, compact
from ds4sessions.steering.writer import Journal

from tests.conftest import ROOT
from tests.sessions.test_writer import copy_old

KEY = "sk-test-replies-0123456789"
SETTINGS = CompactionSettings(keep_recent_tokens=100)


class StreamServer:
    """A real HTTP server on 127.0.0.1 whose `respond(request) -> (status, headers, chunks)`
    streams `chunks` (an iterable of bytes; a client that hangs up ends it quietly)."""

    def __init__(self, respond: Callable[[dict[str, Any]], tuple[int, dict[str, str], Iterable[bytes]]]) -> None:
        self.requests: list[dict[str, Any]] = []
        self.sent = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.requests.append({"path": self.path, "body": json.loads(raw)})
                status, headers, chunks = respond(outer.requests[-1])
                self.send_response(status)
                self.send_header("content-type", "application/json")
                for name, value in headers.items():
                    self.send_header(name, value)
                chunked = "content-length" not in {k.lower() for k in headers}
                if chunked:
                    self.send_header("transfer-encoding", "chunked")
                self.send_header("connection", "close")
                self.end_headers()
                try:
                    for chunk in chunks:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                        outer.sent += len(chunk)
                    if chunked:
                        self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading: what a capped reader does
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> StreamServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def body(data: Any) -> tuple[int, dict[str, str], list[bytes]]:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return 200, {"content-length": str(len(raw))}, [raw]


def openai(text: Any = "## Goal\nKeep the 404s.", usage: Any = None, **choice: Any) -> dict[str, Any]:
    usage = {"prompt_tokens": 7000, "completion_tokens": 60, "prompt_tokens_details": {"cached_tokens": 6500}} if usage is None else usage
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop", **choice}],
            "usage": usage}


def anthropic(blocks: Any = None, usage: Any = None) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "## Goal\nSummary."}] if blocks is None else blocks,
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 300, "output_tokens": 40, "cache_read_input_tokens": 6000,
                      "cache_creation_input_tokens": 0} if usage is None else usage}


DEEP = b'{"choices":' + b"[" * 100_000 + b"]" * 100_000 + b"}"

MALFORMED: dict[str, tuple[str, Any, str]] = {
    "choices is an object": ("openai", {"choices": {"0": {}}}, "the reply's choices is an object, not an array"),
    "message is a list": ("openai", {"choices": [{"message": [], "finish_reason": "stop"}]},
                          "choices[0]'s message is an array, not a JSON object"),
    "choice is a list": ("openai", {"choices": [[1]]}, "choices[0] is an array, not a JSON object"),
    "usage is a list": ("openai", openai(usage=[7000]), "usage is an array, not a JSON object"),
    "string usage": ("openai", openai(usage={"prompt_tokens": "7000", "completion_tokens": 5}),
                     "usage's prompt_tokens is a string ('7000'), not a token count"),
    "cached details a list": ("openai", openai(usage={"prompt_tokens": 7, "prompt_tokens_details": [1]}),
                              "prompt_tokens_details is an array"),
    "usage 1e308": ("openai", openai(usage={"prompt_tokens": 1e308, "completion_tokens": 5}), "prompt_tokens is a number (1e+308)"),
    "usage 10**30": ("openai", openai(usage={"prompt_tokens": 10**30, "completion_tokens": 5}), "not a token count"),
    "usage negative": ("openai", openai(usage={"prompt_tokens": 10, "completion_tokens": -5}), "completion_tokens is a number (-5)"),
    "usage NaN": ("openai", b'{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":NaN}}',
                  "NaN is not JSON"),
    "more cached than prompt": ("openai", openai(usage={"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 11}}),
                                "more cached tokens (11) than prompt tokens (10)"),
    "numeric text": ("openai", openai(text=12345), "message's content is a number (12345), not a string"),
    "text is an object": ("openai", openai(text={"t": "x"}), "content is an object, not a string"),
    "deep nesting": ("openai", DEEP, "nests deeper than 200 levels"),
    "top-level list": ("openai", [openai()], "the reply is an array, not a JSON object"),
    "anthropic numeric text": ("anthropic", anthropic([{"type": "text", "text": 5}]), "content[0]'s text is a number (5)"),
    "anthropic block list": ("anthropic", anthropic([["text"]]), "content[0] is an array, not a JSON object"),
    "anthropic content object": ("anthropic", anthropic({"type": "text"}), "content is an object, not an array"),
    "anthropic string usage": ("anthropic", anthropic(usage={"input_tokens": "300"}), "input_tokens is a string"),
    "anthropic usage NaN": ("anthropic", b'{"content":[{"type":"text","text":"x"}],"stop_reason":"end_turn",'
                                         b'"usage":{"input_tokens":Infinity}}', "Infinity is not JSON"),
}


@pytest.fixture
def session(sample01: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
    yield copy_old(sample01, tmp_path)


def refused(session: Path, api: str, respond: Callable[..., Any], **kwargs: Any) -> str:
    """Run `compact` against the server; return the one-line refusal after checking that nothing
    was written (file byte-identical, no journal record)."""
    before = session.read_bytes()
    journal = Journal()
    with StreamServer(respond) as server:
        with pytest.raises(CompactionFailed) as err:
            compact(session, endpoint=Endpoint(api, server.base, "m", KEY), settings=SETTINGS, journal=journal, **kwargs)
    message = str(err.value)
    assert "\n" not in message and KEY not in message
    assert session.read_bytes() == before
    assert journal.list() == []
    return message


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_reply_is_one_line_and_writes_nothing(session: Path, case: str) -> None:
    api, data, why = MALFORMED[case]
    message = refused(session, api, lambda req: body(data))
    assert why in message, message


def test_a_400_mb_reply_is_refused_by_its_length_before_reading(session: Path) -> None:
    head = b'{"choices":[{"message":{"content":"'

    def respond(req: dict[str, Any]) -> tuple[int, dict[str, str], Iterable[bytes]]:
        return 200, {"content-length": str(400 << 20)}, iter([head, b"x" * (1 << 20)])

    message = refused(session, "openai", respond)
    assert "is 419,430,400 bytes, above the 8,388,608-byte cap of a summary reply; refused before reading it" in message


def test_a_400_mb_streamed_reply_is_refused_at_the_cap(session: Path) -> None:
    """No Content-Length (chunked): the reader stops at the cap; the server could send only a
    little more than the cap before the client hung up."""
    chunk = b"x" * (1 << 20)

    def respond(req: dict[str, Any]) -> tuple[int, dict[str, str], Iterable[bytes]]:
        return 200, {}, (b'{"choices":[{"message":{"content":"' if i == 0 else chunk for i in range(400))

    with StreamServer(respond) as server:
        before = session.read_bytes()
        with pytest.raises(CompactionFailed, match="passed the 8,388,608-byte cap of a summary reply; refused"):
            compact(session, endpoint=Endpoint("openai", server.base, "m", KEY), settings=SETTINGS, journal=Journal())
        assert session.read_bytes() == before
    assert server.sent < 64 << 20  # stopped early (socket buffers hold a few MB at most)


def test_a_summary_above_the_line_cap_is_refused(session: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's 35.6 MB compaction line, at a scale a test can afford: with the reader's line
    cap at 1 MiB, a 1.5 MB summary (under the reply cap) would be a line the reader skips."""
    from ds4sessions.ingest import limits

    monkeypatch.setattr(limits, "MAX_LINE_BYTES", 1 << 20)
    message = refused(session, "openai", lambda req: body(openai("## Goal\n" + "s" * 1_500_000)))
    assert re.search(r"the summary is 1,50\d,\d+ bytes: its compaction line \([\d,]+ bytes\) would pass the 1,044,480-byte", message)


def test_a_summary_under_the_line_cap_is_written_and_read_back(session: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ds4sessions.ingest import limits

    monkeypatch.setattr(limits, "MAX_LINE_BYTES", 1 << 20)
    with StreamServer(lambda req: body(openai("## Goal\n" + "s" * 900_000))) as server:
        outcome = compact(session, endpoint=Endpoint("openai", server.base, "m", KEY), settings=SETTINGS, journal=Journal())
    assert outcome.write is not None and outcome.write.length < (1 << 20) - 4096
    entry = read_session(session).entries[-1]
    assert entry.type == "compaction" and len(entry.raw["summary"]) > 900_000


@pytest.mark.slow
def test_the_cli_refuses_a_400_mb_reply_with_bounded_memory(sample01: Path, tmp_path: Path) -> None:
    """`ds4tui compact --yes` as a process against a 400 MB chunked reply: exit 1, one line,
    the file untouched, and the process's peak RSS (VmHWM) far below the reply (was ~870 MB)."""
    session = copy_old(sample01, tmp_path)
    before = session.read_bytes()
    agent = Path(os.environ["PI_CODING_AGENT_DIR"])
    (agent / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 100}}))
    chunk = b"x" * (1 << 20)
    code = ("import re, sys\nfrom ds4tui.cli import main\ntry:\n    main()\nfinally:\n"
            "    hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
            "    print('VmHWM', hwm, file=sys.stderr)\n")
    with StreamServer(lambda req: (200, {}, (b'{"choices":[{"message":{"content":"' if i == 0 else chunk for i in range(400)))) as server:
        env = {**os.environ, "DS4TUI_STATE_DIR": str(tmp_path / "state"), "DS4TUI_SUMMARY_API": "openai",
               "DS4TUI_SUMMARY_BASE_URL": server.base, "DS4TUI_SUMMARY_API_KEY": KEY, "DS4TUI_SUMMARY_MODEL": "m"}
        out = subprocess.run([sys.executable, "-c", code, "compact", str(session), "--yes", "--force"], capture_output=True,
                             text=True, env=env, cwd=ROOT, timeout=120, check=False)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1, out.stderr[-2000:]
    assert lines[0].startswith("ds4tui: refused, nothing written: the reply from") and "byte cap" in lines[0], lines
    rss_kb = int(lines[-1].split()[1])
    print("peak RSS kB", rss_kb)
    assert rss_kb < 200_000, rss_kb
    assert session.read_bytes() == before
