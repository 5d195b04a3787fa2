"""OpenAI Codex CLI rollouts (shared/docs/codex-format.md; codex-rs sources cited per rule).

- `CodexAgent` (agent.py): the plug-in listed in `ds4sessions.agents.registry`.
- `CodexReader` / `read_rollout` (reader.py): rollout lines → the neutral `Conversation`.
- `discovery`: `$CODEX_HOME` rollouts, thread names, liveness, the configured window.
- `tokens`: nested usage → disjoint buckets, Codex's "% left" (BASELINE_TOKENS), the 95 % window.
"""

from ds4sessions.agents.codex.agent import CodexAgent, looks_like_rollout
from ds4sessions.agents.codex.reader import CAPABILITIES, CodexReader, read_rollout

__all__ = ["CAPABILITIES", "CodexAgent", "CodexReader", "looks_like_rollout", "read_rollout"]
