"""ds4sessions: agent session formats (Pi JSONL v3 first), tree, context builder, tailer."""
