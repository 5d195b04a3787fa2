"""The dashboard's steering actions: pin, list pins, collapse turns, compact.

`SteeringController` is an object the app owns and calls (`app.steering.pin()`, bound to `p`,
`P`, `c`, `C`); it knows the app only through the small `SteeringHost` protocol, so this module
does not import the app (no import cycle). Each action reads the file's state off the UI thread,
shows a confirm dialog (`ds4tui.widgets.steer`) with its preview, and on confirmation performs the
append-only write (`ds4sessions.steering.steer`, `ds4sessions.steering.compaction`) in a worker,
passing the state the user saw so a changed file is refused. The outcome — what was written
where, or why nothing was — goes to the status line and a notification. The tailer then picks
the new entries up like any other append.

When a live ds4tui bridge runs inside Pi for this session (issue 7, `docs/bridge.md`), the
action goes through it instead: Pi applies it with its own API, so a running agent sees it at
once; otherwise the direct writer (with its refusals) is used. The status line names the path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol

from ds4sessions.bridge import channel as bridge
from ds4sessions.steering.steer import collapse, list_pins, pin
from ds4sessions.steering.writer import Journal, WriteRefused, open_holders, read_state
from ds4tui.widgets.steer import CollapseScreen, CompactionScreen, JournalScreen, PinScreen, PinsScreen


class SteeringHost(Protocol):
    """What the controller needs from the app (`ds4tui.app.Ds4App` implements it).

    - `session_path`: the open session file; `snapshot`: the snapshot on screen (or None);
    - `selected_entry_id()`: the entry selected on the map / turns / manifest (or None);
    - `status(text, error=...)`: report an outcome (status line and notification; UI thread);
    - `select_entry(entry_id)`: select that entry on screen (UI thread);
    - `refresh_session()`: re-read the file (any thread);
    - `push_screen`, `call_from_thread`, `run_worker`: Textual's `App` methods.
    """

    session_path: Path
    snapshot: Any

    def selected_entry_id(self) -> str | None: ...
    def status(self, text: str, *, error: bool = False) -> None: ...
    def select_entry(self, entry_id: str | None) -> None: ...
    def refresh_session(self, force: bool = False) -> None: ...
    def push_screen(self, screen: Any, callback: Any = None) -> Any: ...
    def call_from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...
    def run_worker(self, work: Any, *args: Any, **kwargs: Any) -> Any: ...


class SteeringController:
    """Steering actions for one app (`host`): `pin()`, `pins()`, `collapse()`, `compact()`.
    Slow steps (reading the file's state, previews, the write) run in thread workers of the
    groups `steer` and `write`; dialogs are pushed from there through `call_from_thread`."""

    def __init__(self, host: SteeringHost) -> None:
        self.host = host

    def _run(self, fn: Callable[[], None], group: str) -> None:
        self.host.run_worker(fn, thread=True, group=group, exit_on_error=False)

    def _ask(self, screen: Any, then: Callable[[Any], None]) -> None:
        """Push `screen` from a worker thread; run `then(result)` on the UI thread."""
        self.host.call_from_thread(self.host.push_screen, screen, then)

    def _report(self, text: str, *, error: bool = False) -> None:
        """`host.status` from a worker thread."""
        self.host.call_from_thread(self.host.status, text, error=error)

    def _refused(self, action: str) -> bool:
        """True (and the reason on the status line, one line) when the open session's agent
        cannot be steered (`Capabilities.steering`): nothing is read or written."""
        snap = self.host.snapshot
        if snap is None or snap.capabilities.steering:
            return False
        self.host.status(f"{action}: refused, nothing written: {snap.capabilities.read_only_reason}", error=True)
        return True

    # --- pin ---------------------------------------------------------------------------------

    def pin(self) -> None:
        """Pin or unpin the selected entry (a `ds4:pin` label), after confirmation."""
        if self._refused("pin"):
            return
        entry_id = self.host.selected_entry_id()
        if entry_id is None:
            self.host.status(f"pin: nothing selected: {self.host.selection_note()}", error=True)
            return
        self._run(lambda: self._prepare_pin(entry_id), "steer")

    def _prepare_pin(self, entry_id: str) -> None:
        from ds4tui.widgets.panels import _content_preview

        path = self.host.session_path
        state = read_state(path)
        entry = state.session.by_id.get(entry_id)
        preview = ""
        if entry is not None and isinstance(entry.message, dict):
            preview = _content_preview(entry.message)[:300]
        screen = PinScreen(state, entry_id, preview=preview, holders=open_holders(path))
        clear = _is_pinned(state, entry_id)
        self._ask(screen, lambda decision: decision and self._write(
            lambda: pin(path, entry_id, clear=clear, expected=decision.expected, force=decision.force, journal=Journal()),
            lambda: bridge.bridge_pin(path, entry_id, clear=clear, expected=decision.expected),
        ))

    def pins(self) -> None:
        """List the pinned entries; choosing one selects it."""
        if self._refused("pins"):
            return
        self._run(self._prepare_pins, "steer")

    def _prepare_pins(self) -> None:
        from ds4tui.widgets.panels import _content_preview

        state = read_state(self.host.session_path)
        pins = list_pins(state.session)
        previews = {}
        for p in pins:
            entry = state.session.by_id.get(p.target_id)
            if entry is not None and isinstance(entry.message, dict):
                previews[p.target_id] = _content_preview(entry.message)[:80]
        self._ask(PinsScreen(pins, previews), self.host.select_entry)

    # --- collapse ----------------------------------------------------------------------------

    def collapse(self) -> None:
        """Collapse the last N finished turns into a branch summary, after a preview."""
        if self._refused("collapse"):
            return
        entry_id = self.host.selected_entry_id()
        note = None if entry_id is not None else self.host.selection_note()
        self._run(lambda: self._prepare_collapse(entry_id, note), "steer")

    def _prepare_collapse(self, entry_id: str | None, note: str | None) -> None:
        """The collapse dialog, its span starting at the turn of the highlighted entry (every
        finished turn from there on), or at the last turn when nothing is highlighted."""
        from ds4sessions.steering.steer import turns_through

        path = self.host.session_path
        state = read_state(path)
        snap = self.host.snapshot
        model = snap.model if snap else None
        turns = turns_through(state.session, entry_id) if entry_id is not None else None
        if entry_id is None:
            origin = f"nothing selected ({note}): the last turn"
        elif turns is None:
            origin = f"the selected entry {entry_id} is in no turn that can be collapsed: the last turn"
        else:
            origin = f"from the selected entry {entry_id}"
        screen = CollapseScreen(state, model, turns=turns or 1, holders=open_holders(path), origin=origin)
        self._ask(screen, lambda decision: decision and self._write(
            lambda: collapse(path, decision.turns, expected=decision.expected, model=model,
                             force=decision.force, journal=Journal()),
            lambda: bridge.bridge_collapse(path, decision.turns, expected=decision.expected, model=model),
        ))

    # --- the journal ---------------------------------------------------------------------------

    def journal(self) -> None:
        """List ds4tui's writes to this session; undo the one the user picks (the CLI's
        `journal list PATH` and `journal undo N`, with the same checks)."""
        if self._refused("journal"):
            return
        self._run(self._prepare_journal, "steer")

    def _prepare_journal(self) -> None:
        path = self.host.session_path
        try:
            journal = Journal()
            records = journal.list(path)
        except Exception as exc:  # an unusable journal: say so in one line
            self._report(f"journal: {exc}", error=True)
            return
        screen = JournalScreen(records, path.name, str(journal.path))
        self._ask(screen, lambda record_id: record_id is not None and self._write(
            lambda: self._undo(record_id)))

    @staticmethod
    def _undo(record_id: int) -> Any:
        from ds4sessions.steering.steer import undo

        result = undo(record_id, journal=Journal())
        return _Undone(record_id, result)

    # --- compaction --------------------------------------------------------------------------

    def compact(self) -> None:
        """Preview Pi's compaction and, on confirmation, request the summary and append it."""
        if self._refused("compact"):
            return
        self._run(self._prepare_compact, "steer")

    def _prepare_compact(self) -> None:
        from ds4sessions.steering.compaction import CompactionFailed, Endpoint, compact, preview_compaction  # httpx: loaded on use

        path = self.host.session_path
        state = read_state(path)
        snap = self.host.snapshot
        model = snap.model if snap else None
        session_model = snap.context.model if snap else None
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

    def _bridge_live(self) -> bool:
        snap = self.host.snapshot
        try:
            return bool(snap and snap.reader.session_id and bridge.status(snap.reader.session_id).live)
        except ValueError:  # a session id Pi would not write: no bridge channel for it
            return False

    def _write(self, direct: Callable[[], Any], via_bridge: Callable[[], Any] | None = None) -> None:
        """Run one confirmed action (on the UI thread: starts the write worker)."""
        self._run(lambda: self._do_write(direct, via_bridge), "write")

    def _do_write(self, direct: Callable[[], Any], via_bridge: Callable[[], Any] | None) -> None:
        from ds4sessions.steering.compaction import CompactionFailed

        """Run the action through the live bridge when there is one (else, or when it turns
        out unavailable, with the direct writer); report what was done where, or why not."""
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
            self._report(f"nothing written: {exc}", error=True)
            return
        failed = getattr(result, "applied", True) is False
        self._report(result.describe(), error=failed)
        self.host.refresh_session()


class _Undone:
    """An undo's result, described with the record it undid."""

    def __init__(self, record_id: int, result: Any) -> None:
        self.record_id = record_id
        self.result = result

    def describe(self) -> str:
        return f"undid #{self.record_id}: {self.result.describe()}"


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

