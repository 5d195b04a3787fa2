"""Gemini CLI sessions (shared/docs/gemini-cli-format.md; `@google/gemini-cli` 0.61.0 sources cited per rule).

- `GeminiCliAgent` (agent.py): the plug-in listed in `ds4sessions.agents.registry`.
- `GeminiReader` / `read_session` (reader.py): session records → the neutral `Conversation`,
  replayed as the CLI's loader does.
- `discovery`: `$GEMINI_CLI_HOME`/`~/.gemini`, projects, subagents, `model.compressionThreshold`.
- `categories`, `cockpit`: the dashboard's rows, context count, compression threshold and cache.
- `models`: the CLI's windows, its compression default and prices (`ds4core/data/gemini-models.json`,
  made by `make_models`).
"""

from ds4sessions.agents.gemini.agent import GeminiCliAgent, looks_like_gemini
from ds4sessions.agents.gemini.reader import CAPABILITIES, GeminiReader, read_session

__all__ = ["CAPABILITIES", "GeminiCliAgent", "GeminiReader", "looks_like_gemini", "read_session"]
