"""Every session of every agent, summarised and kept current without re-reading files.

`Overview` is the sessions-layer engine behind the home screen, `ds4tui sessions --json` and
`ds4tui usage`:

- `scan()` lists every agent's sessions (`Agent.discover()`, cheap) and answers each file from the
  overview index when its size and mtime are unchanged; the others are returned as `pending`;
- `read(info)` summarises one pending file: a full read through its agent's incremental reader
  (`Tailer` → `SessionReader.feed`), stored in the index. The reader and tailer of a *live* file
  are kept, so when it grows only the appended bytes are read (`update(path)`); idle files keep
  no reader (their summary lives in the index);
- `poll()` stats every known file (one `os.stat` each; a session that is not a file, named by a
  handle, is asked of its plug-in: `agents.registry.session_stat`) and updates the ones that
  changed;
- `all()` returns every summary read so far.

Not thread-safe: drive one `Overview` from one thread at a time (the app uses one worker group).
A file no agent can read, or one whose read fails, becomes a `problems` line (never a crash).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ds4sessions.overview.index import OverviewIndex
from ds4sessions.overview.summary import OverviewSettings, SessionSummary

if TYPE_CHECKING:  # imported where used: `cached()` (the first paint) needs none of them
    from ds4core.models import ModelTable

    from ds4sessions.agents.base import Agent, SessionInfo, SessionReader
    from ds4sessions.ingest.tailer import Tailer
    from ds4sessions.overview.prices import PriceBook


def session_stat(key: str) -> Any:
    """`os.stat(key)`; for a path that is no file, its plug-in's answer when it names a session
    that is not a file (`agents.registry.session_stat`: the agents are imported only then)."""
    try:
        return os.stat(key)
    except FileNotFoundError:
        from ds4sessions.agents.registry import session_stat as handle_stat

        return handle_stat(key)


@dataclass
class _Open:
    """A file with a kept reader (live files and files that changed during this run)."""

    agent: Agent
    tailer: Tailer
    reader: SessionReader
    info: SessionInfo | None


@dataclass(frozen=True)
class ScanResult:
    """What `Overview.scan()` found: `summaries` answered from the index, `pending` files to read
    (newest first), `problems` one line each (agent discovery failures, index rebuilds)."""

    summaries: tuple[SessionSummary, ...]
    pending: tuple[SessionInfo, ...]
    problems: tuple[str, ...]


class Overview:
    """Summaries of every discovered session (module doc).

    `agents` default to `all_agents()`; `index` to the one in the state dir; `models` to the
    bundled model table; `now` is the clock (epoch seconds) used for liveness by recency.
    """

    def __init__(
        self,
        agents: Sequence[Agent] | None = None,
        *,
        index: OverviewIndex | None = None,
        models: ModelTable | None = None,
        settings: OverviewSettings | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._agents = tuple(agents) if agents is not None else None
        self.index = index if index is not None else OverviewIndex()
        self._models = models
        self._prices: PriceBook | None = None
        self.settings = settings or OverviewSettings.from_env()
        self.now = now
        self._summaries: dict[str, SessionSummary] = {}
        self._infos: dict[str, SessionInfo] = {}
        self._open: dict[str, _Open] = {}
        self._stat: dict[str, tuple[int, float]] = {}
        self.problems: list[str] = []

    @property
    def _key(self) -> str:
        """The index answers only from rows made under these settings (`OverviewSettings.index_key`)."""
        return self.settings.index_key()

    @property
    def agents(self) -> tuple[Agent, ...]:
        """The agent plug-ins (imported on first use: the first paint from the index needs none)."""
        if self._agents is None:
            from ds4sessions.agents.registry import all_agents

            self._agents = all_agents()
        return self._agents

    @property
    def models(self) -> ModelTable:
        """The model table (loaded on first use)."""
        if self._models is None:
            from ds4core.models import ModelTable

            self._models = ModelTable.bundled()
        return self._models

    @property
    def prices(self) -> PriceBook:
        """The price lookup (made on first use)."""
        if self._prices is None:
            from ds4sessions.overview.prices import PriceBook

            self._prices = PriceBook(self.models)
        return self._prices

    # --- listing ---------------------------------------------------------------------------

    def discover(self) -> list[SessionInfo]:
        """Every agent's sessions (each agent's own order); an agent whose discovery fails adds a
        problem line and lists nothing."""
        infos: list[SessionInfo] = []
        for agent in self.agents:
            try:
                infos.extend(agent.discover())
            except Exception as exc:  # one broken plug-in must not hide the others
                self.problems.append(f"{agent.name}: discovery failed: {type(exc).__name__}: {exc}")
        return infos

    def _is_live(self, info: SessionInfo | None, modified: float) -> bool:
        return bool(info and info.live) or (self.now() - modified) < self.settings.live_s

    def scan(self) -> ScanResult:
        """List every session; answer unchanged files from the index (see `ScanResult`)."""
        self.problems = list(self.settings.notes)
        if self.index.problem:
            self.problems.append(self.index.problem)
        infos = self.discover()
        stored = self.index.load(self._key)
        seen: set[str] = set()
        ready: list[SessionSummary] = []
        pending: list[SessionInfo] = []
        for info in infos:
            key = str(info.path)
            if key in seen:
                continue
            seen.add(key)
            self._infos[key] = info
            hit = stored.get(key)
            if key in self._summaries and self._stat.get(key) == (info.size, info.modified):
                summary = self._summaries[key].with_live(self._is_live(info, info.modified))
                self._summaries[key] = summary
                ready.append(summary)
            elif hit is not None and hit[0] == info.size and hit[1] == info.modified:
                summary = hit[2].with_live(self._is_live(info, info.modified))
                self._summaries[key] = summary
                self._stat[key] = (info.size, info.modified)
                ready.append(summary)
            else:
                pending.append(info)
        gone = [p for p in self.index.paths() if p not in seen]  # (rows of any settings)
        if gone:
            self.index.forget(gone)
        for key in [k for k in self._summaries if k not in seen]:
            self._summaries.pop(key, None)
            self._open.pop(key, None)
        pending.sort(key=lambda i: i.modified, reverse=True)
        return ScanResult(tuple(ready), tuple(pending), tuple(self.problems))

    def cached(self) -> list[SessionSummary]:
        """The summaries the index holds for files whose size and mtime are unchanged: one
        `os.stat` per indexed file, no discovery and no read (the fast first paint; `scan()`
        then adds new files and the agents' own liveness). Liveness here is by recency only."""
        for note in (*self.settings.notes, self.index.problem):
            if note and note not in self.problems:
                self.problems.append(note)
        out: list[SessionSummary] = []
        for key, (size, mtime, summary) in self.index.load(self._key).items():
            try:
                st = session_stat(key)
            except OSError:
                continue
            if (st.st_size, st.st_mtime) != (size, mtime):
                continue
            summary = summary.with_live(self._is_live(None, mtime))
            self._summaries[key] = summary
            self._stat[key] = (size, mtime)
            out.append(summary)
        return out

    def paths(self) -> list[str]:
        """Every file with a summary."""
        return list(self._summaries)

    def knows(self, path: str) -> bool:
        """True when `path` has a summary."""
        return path in self._summaries

    def live_paths(self) -> list[str]:
        """Files that are live or have a kept reader (polled often)."""
        return [k for k, s in self._summaries.items() if s.live or k in self._open]

    def all(self) -> list[SessionSummary]:
        """Every summary known so far."""
        return list(self._summaries.values())

    def load_all(self) -> list[SessionSummary]:
        """`scan()` then `read()` every pending file: the complete, current list (for the CLI)."""
        result = self.scan()
        self.read_many(result.pending)
        return self.all()

    # --- reading ---------------------------------------------------------------------------

    def read_many(self, infos: Iterable[SessionInfo]) -> list[SessionSummary]:
        """`read` each of `infos` and store the summaries in the index in one transaction."""
        out = [s for info in infos if (s := self._read(info.path, info)) is not None]
        self.index.store(out, self._key)
        return out

    def read(self, info: SessionInfo) -> SessionSummary | None:
        """Summarise one file from its start (and store it); None when it cannot be read."""
        summary = self._read(info.path, info)
        if summary is not None:
            self.index.store([summary], self._key)
        return summary

    def _agent_of(self, path: Path, info: SessionInfo | None) -> Agent | None:
        if info is not None:
            found = next((a for a in self.agents if a.name == info.agent), None)
            if found is not None:
                return found
        from ds4sessions.agents.registry import agent_for_path

        try:
            return agent_for_path(path)
        except OSError as exc:
            self.problems.append(f"{path}: {exc.strerror or exc}")
            return None

    def _read(self, path: Path, info: SessionInfo | None) -> SessionSummary | None:
        key = str(path)
        agent = self._agent_of(Path(path), info)
        if agent is None:
            if key not in {p.split(": ")[0] for p in self.problems}:
                self.problems.append(f"{path}: no agent recognizes this file")
            return None
        from ds4sessions.agents.registry import tailer_for

        opened = _Open(agent, tailer_for(agent, Path(path)), agent.reader(Path(path)), info)
        self._open[key] = opened
        return self._advance(key, opened)

    def _advance(self, key: str, opened: _Open) -> SessionSummary | None:
        try:
            for batch in opened.tailer.polls():  # (a large file: one slice of lines in memory at a time)
                if batch.reset is not None and batch.reset != "deleted":
                    opened.reader = opened.agent.reader(opened.tailer.path)
                if batch.reset == "deleted":
                    self._open.pop(key, None)
                    return self._summaries.get(key)
                if batch.lines:
                    opened.reader.feed(batch.lines)
            conversation = opened.reader.conversation()
            st = session_stat(key)
        except Exception as exc:  # a reader bug or an unreadable file: one visible line
            self.problems.append(f"{key}: {type(exc).__name__}: {exc}")
            self._open.pop(key, None)
            return None
        from ds4sessions.overview.summary import summarize

        summary = summarize(
            conversation, opened.info, models=self.models, prices=self.prices, settings=self.settings,
            size=batch.size, modified=st.st_mtime, offset=batch.offset,
        )
        live = self._is_live(opened.info, st.st_mtime)
        summary = summary.with_live(live)
        self._summaries[key] = summary
        self._stat[key] = (st.st_size, st.st_mtime)
        if not live:
            self._open.pop(key, None)  # idle: its summary is in the index, no reader kept
        return summary

    def update(self, path: Path | str, store: bool = True) -> SessionSummary | None:
        """Bring one file up to date: only the appended bytes when its reader is kept, else one
        full read (after which its reader is kept while it is live)."""
        key = str(path)
        opened = self._open.get(key)
        summary = self._advance(key, opened) if opened is not None else self._read(Path(key), self._infos.get(key))
        if summary is not None and store:
            self.index.store([summary], self._key)
        return summary

    def poll(self, paths: Iterable[str] | None = None) -> list[SessionSummary]:
        """Stat every known file (or only `paths`) and update those whose size or mtime changed
        (their summaries, in no particular order). Files that vanished are dropped."""
        changed: list[SessionSummary] = []
        keys = list(self._summaries) if paths is None else [str(p) for p in dict.fromkeys(paths)]
        for key in keys:
            try:
                st = session_stat(key)
            except OSError:
                self._summaries.pop(key, None)
                self._open.pop(key, None)
                self.index.forget([key])
                continue
            if self._stat.get(key) == (st.st_size, st.st_mtime):
                continue
            summary = self.update(key, store=False)
            if summary is not None:
                changed.append(summary)
        self.index.store(changed, self._key)
        return changed

    @property
    def open_readers(self) -> int:
        """How many files have a kept reader (live files)."""
        return len(self._open)
