"""The map's numbers as plain data: moved to `ds4sessions.ingest.snapshot_json` (every agent's
snapshot, not only Pi's); kept importable here."""

from ds4sessions.ingest.snapshot_json import dumps_map, map_json, problem_lines, rows_json, turn_rows  # noqa: F401
