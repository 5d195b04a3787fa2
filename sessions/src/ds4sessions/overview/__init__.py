"""Every session of every agent at a glance: per-session summaries (context, prompt-cache clock,
usage by day and model), a derived SQLite index so idle files are read once, usage roll-ups and
the cache-expiry notice rule.

- `summary`: `SessionSummary`, `summarize(conversation, …)`, the cache rules per agent;
- `index`: `OverviewIndex` (state dir, schema version, rebuilt when deleted);
- `scanner`: `Overview` (scan / read / update / poll);
- `usage`: `rollup(summaries, by=…, since=…)` like ccusage;
- `notice`: `ExpiryNotifier` (once per expiry, lead time, injectable clock);
- `prices`: `PriceBook` (recorded cost, else price tables with source and date).
"""
