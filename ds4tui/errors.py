"""Top-level error handling of the `ds4tui` command: one line, never a traceback.

Conditions a user can cause — an unusable state dir or journal, a FIFO/device/socket given as a
session, an unreadable file, a file system that refuses a write — end with `ds4tui: <reason>`
on stderr and exit code 2. Anything else is a bug: it still ends with one line (`internal
error`, exit 2) unless `DS4TUI_DEBUG=1` asks for the traceback. Every message goes through
`ds4sessions.safety.redact` (no credentials in URLs, headers or query strings) and is printed
with lone surrogates escaped (`\\ud800`), so printing never fails.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable
from typing import Any

from ds4sessions.safety import printable, redact

BAD_INPUT = 2


def safe_streams() -> None:
    """Make stdout/stderr escape what they cannot encode (lone surrogates from JSON `\\ud800`)
    instead of raising `UnicodeEncodeError`."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def one_line(err: BaseException) -> str:
    """The user-facing sentence for `err` (redacted, one line, printable)."""
    from ds4sessions.steering.journal import JournalError

    if isinstance(err, JournalError):
        text = str(err)
    elif isinstance(err, OSError):
        where = f"{err.filename}: " if getattr(err, "filename", None) else ""
        text = f"{where}{err.strerror}" if err.strerror else str(err)
    elif isinstance(err, sqlite3.Error):
        text = f"database error: {err}"
    elif isinstance(err, MemoryError):
        text = "out of memory"
    else:
        text = f"internal error ({type(err).__name__}: {err}); please report it (DS4TUI_DEBUG=1 shows the traceback)"
    return printable(redact(" ".join(text.split())))


def run_guarded(run: Callable[[], Any]) -> None:
    """Run the CLI; turn any exception into `ds4tui: <reason>` and exit 2 (see the module)."""
    safe_streams()
    try:
        from ds4sessions.ingest.limits import SETTING_PROBLEMS

        if SETTING_PROBLEMS:
            print(f"ds4tui: {printable(SETTING_PROBLEMS[0])}", file=sys.stderr)
            sys.exit(BAD_INPUT)
        run()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as err:  # noqa: BLE001 — the one place that turns errors into a line
        if os.environ.get("DS4TUI_DEBUG"):
            raise
        print(f"ds4tui: {one_line(err)}", file=sys.stderr)
        sys.exit(BAD_INPUT)
