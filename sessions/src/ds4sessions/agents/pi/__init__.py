"""Pi coding agent sessions: JSONL reader, tree and context builder (Pi session format, shared/docs).

- `read_session(path) -> PiSession` reads a whole file; `PiSessionReader.feed(lines)` reads
  complete lines incrementally (from the tailer).
- `build_context(session, leaf_id=None) -> SessionContext` builds what Pi sends to the model;
  `convert_to_llm(messages)` applies Pi's conversion to provider messages.
"""

import os as _os
import sys as _sys

PURE_PYTHON_ENV = "DS4TUI_PURE_PYTHON"
"""`DS4TUI_PURE_PYTHON=1`: run without the optional C extension `_cprep` even where it is built,
as a user without a C compiler does (CI runs the whole suite so, issue 30). Read here, before
any module of the package imports `_cprep`: the module is marked absent (`sys.modules[...] =
None`), so every `from ds4sessions.agents.pi import _cprep` raises ImportError and takes the
pure-Python route, the tests' `importorskip` included."""

if _os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
    _sys.modules.setdefault("ds4sessions.agents.pi._cprep", None)  # type: ignore[assignment]

from ds4sessions.agents.pi.context import ContextWarning, SessionContext, branch_path, build_context, convert_to_llm
from ds4sessions.agents.pi.entries import Entry
from ds4sessions.agents.pi.reader import PiSession, PiSessionReader, read_session

__all__ = [
    "ContextWarning",
    "Entry",
    "PiSession",
    "PiSessionReader",
    "SessionContext",
    "branch_path",
    "build_context",
    "convert_to_llm",
    "read_session",
]
