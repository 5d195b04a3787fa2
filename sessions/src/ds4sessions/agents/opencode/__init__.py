"""OpenCode (`opencode-ai`): sessions read live from its SQLite database (`opencode.db`)."""
