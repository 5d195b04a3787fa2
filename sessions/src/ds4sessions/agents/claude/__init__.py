"""Claude Code plug-in: transcripts under `~/.claude/projects` (see `reader`, `discovery`, `views`)."""
