"""ds4tui: Typer CLI and Textual app showing what fills a coding agent's context window."""
