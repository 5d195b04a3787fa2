"""The dashboard's steering actions: pin, list pins, collapse turns, compact.

Each action reads the file's state off the UI thread, shows a confirm dialog
(`ds4tui.widgets.steer`) with its preview, and on confirmation performs the append-only write
(`ds4sessions.steering.steer`, `ds4sessions.steering.compaction`) in a worker, passing the state the user saw so a
changed file is refused. The outcome — what was written where, or why nothing was — goes to the
status line and a notification. The tailer then picks the new entries up like any other append.

When a live ds4tui bridge runs inside Pi for this session (issue 7, `docs/bridge.md`), the
action goes through it instead: Pi applies it with its own API, so a running agent sees it at
once; otherwise the direct writer (with its refusals) is used. The status line names the path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from textual import work
from textual.widgets import Static

from ds4sessions.bridge import channel as bridge
from ds4sessions.steering.compaction import CompactionFailed, Endpoint, compact, preview_compaction
from ds4sessions.steering.steer import collapse, list_pins, pin
from ds4sessions.steering.writer import Journal, WriteRefused, open_holders, read_state
from ds4tui.text import literal
from ds4tui.widgets.steer import CollapseScreen, CompactionScreen, PinScreen, PinsScreen

if TYPE_CHECKING:
    from ds4tui.app import Ds4App


class StatusLine(Static):
    """One line above the footer: the outcome of the last steering action."""

    def report(self, text: str, *, error: bool = False) -> None:
        """Show `text` (an error in the error colour)."""
        self.set_class(error, "-error")
        self.update(literal(text, keep_newlines=False))


class SteeringMixin:
    """Steering actions for `Ds4App` (bound to `p`, `P`, `c`, `C`)."""

    def _status(self: "Ds4App", text: str, *, error: bool = False) -> None:
        """Report on the status line (the session's path shortened to its name, so the reason
        fits) and in a notification (in full)."""
        short = text.replace(str(self.session_path), self.session_path.name)
        self.query_one(StatusLine).report(short, error=error)
        self.notify(text, title="ds4tui", severity="error" if error else "information", timeout=6)

    def _selected_entry(self: "Ds4App") -> str | None:
        snap = self.snapshot
        if snap is None or self._selected is None or self._selected >= len(snap.context.message_entry_ids):
            return None
        return snap.context.message_entry_ids[self._selected]

    def _ask(self: "Ds4App", screen: Any, then: Callable[[Any], None]) -> None:
        """Push `screen` from a worker thread; run `then(result)` on the UI thread."""
        self.call_from_thread(self.push_screen, screen, then)

    # --- pin ---------------------------------------------------------------------------------

    def action_pin(self: "Ds4App") -> None:
        """Pin or unpin the selected entry (a `ds4:pin` label), after confirmation."""
        entry_id = self._selected_entry()
        if entry_id is None:
            self._status("select an entry first (map, turn list or manifest)", error=True)
            return
        self._prepare_pin(entry_id)

    @work(thread=True, group="steer", exit_on_error=False)
    def _prepare_pin(self: "Ds4App", entry_id: str) -> None:
        path = self.session_path
        state = read_state(path)
        entry = state.session.by_id.get(entry_id)
        preview = ""
        if entry is not None and isinstance(entry.message, dict):
            from ds4tui.widgets.panels import _content_preview

            preview = _content_preview(entry.message)[:300]
        screen = PinScreen(state, entry_id, preview=preview, holders=open_holders(path))
        clear = _is_pinned(state, entry_id)
        self._ask(screen, lambda decision: decision and self._write(
            lambda: pin(path, entry_id, clear=clear, expected=decision.expected, force=decision.force, journal=Journal()),
            lambda: bridge.bridge_pin(path, entry_id, clear=clear, expected=decision.expected),
        ))

    def action_pins(self: "Ds4App") -> None:
        """List the pinned entries; choosing one selects it."""
        self._prepare_pins()

    @work(thread=True, group="steer", exit_on_error=False)
    def _prepare_pins(self: "Ds4App") -> None:
        state = read_state(self.session_path)
        pins = list_pins(state.session)
        previews = {}
        for p in pins:
            entry = state.session.by_id.get(p.target_id)
            if entry is not None and isinstance(entry.message, dict):
                from ds4tui.widgets.panels import _content_preview

                previews[p.target_id] = _content_preview(entry.message)[:80]
        self._ask(PinsScreen(pins, previews), self._jump_to_entry)

    def _jump_to_entry(self: "Ds4App", entry_id: str | None) -> None:
        snap = self.snapshot
        if entry_id is None or snap is None:
            return
        ids = snap.context.message_entry_ids
        if entry_id in ids:
            self._select_message(ids.index(entry_id), sync_turns=True)
        else:
            self.query_one("#inspector").show_entry(snap, entry_id)

    # --- collapse ----------------------------------------------------------------------------

    def action_collapse(self: "Ds4App") -> None:
        """Collapse the last N finished turns into a branch summary, after a preview."""
        self._prepare_collapse()

    @work(thread=True, group="steer", exit_on_error=False)
    def _prepare_collapse(self: "Ds4App") -> None:
        path = self.session_path
        state = read_state(path)
        model = self.snapshot.model if self.snapshot else None
        screen = CollapseScreen(state, model, turns=1, holders=open_holders(path))
        self._ask(screen, lambda decision: decision and self._write(
            lambda: collapse(path, decision.turns, expected=decision.expected, model=model,
                             force=decision.force, journal=Journal()),
            lambda: bridge.bridge_collapse(path, decision.turns, expected=decision.expected, model=model),
        ))

    # --- compaction --------------------------------------------------------------------------

    def action_compact(self: "Ds4App") -> None:
        """Preview Pi's compaction and, on confirmation, request the summary and append it."""
        self._prepare_compact()

    @work(thread=True, group="steer", exit_on_error=False)
    def _prepare_compact(self: "Ds4App") -> None:
        path = self.session_path
        state = read_state(path)
        model = self.snapshot.model if self.snapshot else None
        session_model = self.snapshot.context.model if self.snapshot else None
        preview, refusal, endpoint_text = None, "", ""
        try:
            preview = preview_compaction(state, model=model)
        except WriteRefused as exc:
            refusal = str(exc)
        try:
            endpoint = Endpoint.from_env(session_model)
            endpoint_text = f"{endpoint.api} {endpoint.model} @ {endpoint.url}"
        except CompactionFailed as exc:
            endpoint_text = f"not configured: {exc}"
        screen = CompactionScreen(preview, path=str(path), endpoint=endpoint_text, refusal=refusal,
                                  holders=open_holders(path))
        self._ask(screen, lambda decision: decision and self._write(
            lambda: compact(path, model=model, expected=decision.expected, force=decision.force,
                            journal=Journal()).write,
            lambda: bridge.bridge_compact(path, expected=decision.expected),
        ))

    # --- the write ---------------------------------------------------------------------------

    def _bridge_live(self: "Ds4App") -> bool:
        snap = self.snapshot
        try:
            return bool(snap and snap.reader.session_id and bridge.status(snap.reader.session_id).live)
        except ValueError:  # a session id Pi would not write: no bridge channel for it
            return False

    @work(thread=True, group="write", exit_on_error=False)
    def _write(self: "Ds4App", direct: Callable[[], Any], via_bridge: Callable[[], Any] | None = None) -> None:
        """Run one confirmed action through the live bridge when there is one (else, or when it
        turns out unavailable, with the direct writer); report what was done where, or why not."""
        try:
            result = None
            if via_bridge is not None and self._bridge_live():
                try:
                    result = via_bridge()
                except bridge.BridgeUnavailable:
                    result = None
            if result is None:
                result = _Direct(direct())
        except (WriteRefused, CompactionFailed, bridge.BridgeTimeout) as exc:
            self.call_from_thread(self._status, f"nothing written: {exc}", error=True)
            return
        failed = getattr(result, "applied", True) is False
        self.call_from_thread(self._status, result.describe(), error=failed)
        self.refresh_session()


class _Direct:
    """A direct writer's result, described as such (the status line names the path taken)."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.applied = result is not None

    def describe(self) -> str:
        return "direct write: " + (self.result.describe() if self.result is not None else "nothing written")


def _is_pinned(state: Any, entry_id: str) -> bool:
    from ds4sessions.steering.steer import is_pin

    return is_pin(state.session.labels.get(entry_id))

