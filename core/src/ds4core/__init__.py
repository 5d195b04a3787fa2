"""ds4core: the pure, deterministic engine of ds4tui (no I/O beyond its own data files)."""
