"""Pi coding agent sessions: JSONL reader, tree and context builder (Pi session format, shared/docs).

- `read_session(path) -> PiSession` reads a whole file; `PiSessionReader.feed(lines)` reads
  complete lines incrementally (from the tailer).
- `build_context(session, leaf_id=None) -> SessionContext` builds what Pi sends to the model;
  `convert_to_llm(messages)` applies Pi's conversion to provider messages.
"""

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
