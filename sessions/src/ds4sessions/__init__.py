"""ds4sessions: agent session formats (Pi JSONL v3 first), tree, context builder, tailer."""

from ds4sessions import tokencache as _tokencache

_tokencache.install()  # cl100k's ranks from a cache file (~0.1 s off each process that counts with it)
