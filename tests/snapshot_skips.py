"""Skipped snapshot tests keep their snapshots, and the run says what it skipped and why.

Two helpers for the test session (both wired in `tests/conftest.py`):

- `keep_skipped_snapshot_files()`: syrupy 4.8.0 (pinned by pytest-textual-snapshot 1.1.0)
  reports the SVG of a *skipped* snapshot test as an "unused unknown snapshot collection" when
  every collected test is selected: the run then exits 1 ("N snapshots unused. Re-run pytest with
  --snapshot-update"), and `--snapshot-update` deletes the SVG. That happens to every
  single-file snapshot (pytest-textual-snapshot's SVGs) whose test skips, e.g. without
  `../shared`. Syrupy fixed it in 5.5.1 (syrupy-project/syrupy#1161, "preserve skipped
  single-file snapshots"): a file-level collection is not marked for removal when a skipped test
  owns it (the file's stem is the test's snapshot name). This applies that rule to the older
  syrupy, and does nothing once syrupy has it.
- `skip_summary(reports)`: the skipped tests grouped by reason, one line per reason with the count
  and the files (`pytest -rs` still lists each test).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable

FIXED_IN = (5, 5, 1)
"""The first syrupy release with the rule (syrupy-project/syrupy#1161)."""


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def keep_skipped_snapshot_files() -> bool:
    """Make syrupy's `SnapshotReport.unused` leave out the snapshot files of skipped tests (module
    doc). Returns True when the rule was applied, False when the installed syrupy has it already
    (>= 5.5.1) or is absent. Idempotent."""
    try:
        from importlib.metadata import version

        from syrupy.data import SnapshotCollections, SnapshotUnknownCollection
        from syrupy.report import SnapshotReport
    except ImportError:
        return False
    if _version(version("syrupy")) >= FIXED_IN:
        return False
    original = SnapshotReport.unused
    if getattr(original.fget, "keeps_skipped_files", False):
        return True

    def unused(self: Any) -> Any:
        kept = SnapshotCollections()
        for collection in original.fget(self):
            owned_by_a_skipped_test = isinstance(collection, SnapshotUnknownCollection) and self._skipped_items_match_name(
                snapshot_location=collection.location, snapshot_name=Path(collection.location).stem
            )
            if not owned_by_a_skipped_test:
                kept.add(collection)
        return kept

    unused.keeps_skipped_files = True  # type: ignore[attr-defined]
    unused.__doc__ = original.__doc__
    SnapshotReport.unused = property(unused)  # type: ignore[method-assign]
    return True


def skip_summary(reports: Iterable[Any], root: Path) -> list[str]:
    """One line per skip reason, most frequent first: `"186 tests: REASON (in 23 files: a.py, b.py,
    …)"`. `reports` are pytest's skipped `TestReport`s (`longrepr` = (path, line, "Skipped:
    reason")); paths are shown relative to `root`."""
    counts: Counter[str] = Counter()
    files: dict[str, set[str]] = defaultdict(set)
    for report in reports:
        longrepr = getattr(report, "longrepr", None)
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            path, _, reason = longrepr
        else:
            path, reason = report.location[0], str(longrepr)
        reason = str(reason).removeprefix("Skipped: ")
        counts[reason] += 1
        try:
            shown = str(Path(path).resolve().relative_to(root))
        except ValueError:
            shown = str(path)
        files[reason].add(shown)
    lines = []
    for reason, count in counts.most_common():
        names = sorted(files[reason])
        where = ", ".join(names[:4]) + (f", … ({len(names)} files)" if len(names) > 4 else "")
        lines.append(f"{count} test{'s' if count != 1 else ''}: {reason}  [{where}]")
    return lines
