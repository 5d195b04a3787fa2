"""The OpenCode plug-in: sessions that live in a SQLite database, not in files.

A session is named by its handle, `PATH/opencode.db#ses_…` (`handle`); the registry gives a
handle to this plug-in (`claims_handle`), the live session follows it with `tail.OpenCodeTail`
(the generic `ConversationLive` with this agent's `tailer`), wakes on changes of the database
and its `-wal` (`handle_files`), and the overview lists and polls it with `discover` and
`handle_stat`. Read-only: ds4tui never writes to OpenCode's database (`store`). DS4's plan is a
what-if; retrieval and steering are refused in one line.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from ds4core.models import ModelTable

from ds4sessions.agents.base import Capabilities, SessionInfo
from ds4sessions.agents.opencode import cockpit, discovery, store
from ds4sessions.agents.opencode.handle import make_handle, split_handle
from ds4sessions.agents.plugin import ConversationAgent

CAPABILITIES = Capabilities(
    ds4_plan=True, ds4_exact=False, retrieval=False, steering=False, bridge=False, cache_ttl_recorded=False,
    read_only_reason="OpenCode sessions are read-only: ds4tui never writes to OpenCode's database",
)


@functools.lru_cache(maxsize=64)
def _limits(provider: str | None, model: str | None, directory: str | None) -> Any:
    from ds4sessions.agents.opencode.config import model_limits

    return model_limits(provider, model, directory)


class OpenCodeAgent(ConversationAgent):
    """OpenCode (`opencode-ai`, 1.18.33): sessions read live from `opencode.db` (module doc)."""

    name = "opencode"
    label = "OpenCode"
    capabilities = CAPABILITIES
    categories = cockpit.OPENCODE_TABLE

    # --- finding sessions --------------------------------------------------------------------

    def discover(self) -> list[SessionInfo]:
        """Every session of OpenCode's databases, newest first (`discovery.discover`)."""
        return discovery.discover()

    def recognizes(self, head: bytes) -> bool:
        """False: an OpenCode session is never a file of its own (`claims_handle`)."""
        return False

    def claims(self, head: bytes) -> bool:
        """True for an SQLite database no plug-in recognizes (OpenCode's schema lies beyond the
        first 64 KiB): reading it says what it is in one line, and for OpenCode's database
        which handle to give (`tailer`)."""
        return head.startswith(store.SQLITE_MAGIC)

    def claims_handle(self, text: str) -> bool:
        """True for `PATH#ses_…` (a session of an OpenCode database; the path is checked when
        it is read, so a missing or foreign database gets its own one-line error)."""
        return split_handle(text) is not None

    def handle_files(self, text: str) -> tuple[Path, ...]:
        """The files whose changes may change the session: the database and its `-wal`."""
        parsed = split_handle(text)
        if parsed is None:
            return (Path(text),)
        db = parsed[0]
        return (db, Path(f"{db}-wal"))

    def handle_stat(self, text: str) -> tuple[int, float] | None:
        """`(size, modified)` of the session (`discovery.handle_stat`). Raises OSError (one line)
        when the database cannot be read or the session is not in it."""
        parsed = split_handle(text)
        return discovery.handle_stat(*parsed, timeout=store.FIRST_TIMEOUT_S) if parsed is not None else None

    # --- reading -----------------------------------------------------------------------------

    def tailer(self, path: Path) -> Any:
        """The session's rows, new ones per poll (`tail.OpenCodeTail`). Raises
        `store.OpenCodeDbError` for a database given without a session (it names the newest)."""
        from ds4sessions.agents.opencode.tail import OpenCodeTail

        if split_handle(path) is None:
            store.connect(Path(path)).close()  # (not OpenCode's, corrupt, locked: that line)
            newest = discovery.newest(Path(path))
            hint = f"; the newest: {make_handle(path, newest[0])}" if newest else ""
            count = f"{newest[1]} sessions" if newest else "sessions"
            raise store.OpenCodeDbError(path, f"an OpenCode database holds {count}: give one as PATH#ses_… "
                                              f"(`ds4tui sessions` lists them){hint}")
        return OpenCodeTail(Path(path))

    def reader(self, path: Path) -> Any:
        """A fresh `reader.OpenCodeReader` for the handle `path`."""
        from ds4sessions.agents.opencode.reader import OpenCodeReader

        parsed = split_handle(path)
        db = parsed[0] if parsed is not None else Path(path)
        return OpenCodeReader(Path(path), self.capabilities, limits=_limits,
                              title_calls=lambda sid, title: discovery.title_calls(db, sid))

    def is_prompt(self, message: Any, meta: Any) -> bool:
        """A turn starts at a prompt the user typed (not a synthetic message, not a compaction)."""
        return message.get("role") == "user" and meta is not None and meta.source == "prompt"

    def prompt_preview(self, message: Any) -> str:
        """A prompt's words in the turn list: its typed text (not OpenCode's synthetic parts,
        such as the read of an attached file), one line, 80 characters."""
        blocks = [b for b in message.get("content") or () if isinstance(b, dict) and b.get("type") == "text"]
        typed = [str(b.get("text", "")) for b in blocks if not b.get("synthetic")] or [str(b.get("text", "")) for b in blocks]
        return " ".join(" ".join(typed).split())[:80]

    # --- the cockpit -------------------------------------------------------------------------

    def account(self, conv: Any, memo: dict[str, Any], models: ModelTable | None = None) -> Any:
        """OpenCode's categories and count (`cockpit.account`)."""
        return cockpit.account(conv, memo, models)

    def cache_facts(self, snapshot: Any, now: float, models: ModelTable | None = None) -> Any:
        """Every step once, OpenCode's recorded costs (`cockpit.cache_facts`)."""
        return cockpit.cache_facts(snapshot, now, models)

    def cache_json(self, path: Path, *, at: float | None = None, models: ModelTable | None = None) -> dict[str, Any]:
        """`cache --json` (the default shape) plus `opencode`: the steps, their totals in
        OpenCode's buckets (`output` without `reasoning`), the `session` row's `tokens_*` sums and
        whether they agree, and the title-generation calls kept apart."""
        from ds4sessions.agents.plugin import read_snapshot

        snap = read_snapshot(self, path, models, exact=False)
        out = self._cache_json(snap, at, models)
        extra = snap.conversation.extra
        steps, session = extra.get("stepTotals") or {}, extra.get("sessionTotals")
        keys = ("input", "output", "reasoning", "cacheRead", "cacheWrite")
        out["opencode"] = {
            "steps": extra.get("steps"), "stepTotals": steps, "sessionTotals": session,
            "agrees": None if session is None else all(steps.get(k) == session.get(k) for k in keys),
            "titleGeneration": extra.get("titleGeneration"),
        }
        return out

    def _cache_json(self, snap: Any, at: float | None, models: ModelTable | None) -> dict[str, Any]:
        facts = self.cache_facts(snap, 0.0, models)
        refresh = facts.clock.refresh
        requests = snap.conversation.requests
        last = next((r.timestamp for r in reversed(requests) if r.timestamp is not None), None)
        when = at if at is not None else (refresh.time_s if refresh is not None else last)
        state = facts.clock.state(when if when is not None else 0.0, facts.expiring_s)
        return {"agent": snap.agent, "at": when, "model": facts.model_key, "state": state.to_json(),
                "history": facts.history.to_json(), "cachedPrefixEnd": facts.cached_prefix_end,
                "pricingSource": facts.pricing_source}
