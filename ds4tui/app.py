"""The Textual app: one dashboard for a session of any agent, and the home screen.

`Ds4App` is thin: its default screen is the dashboard (`ds4tui.screens.dashboard.DashboardScreen`,
which renders view models), whose `SessionFeed` (`ds4tui.feed`) schedules the reading and the
derived views on worker threads; `o` pushes the home screen (`ds4tui.screens.home`), from
which any session of any agent opens in the same dashboard. The command palette offers every
dashboard action by its binding's description.

Opened by `ds4tui PATH` on a large file, the first paint comes from a forked copy of the process
that read the file while this one imported Textual (`ds4tui.firstview`): its view model is
painted first, then the feed reads the file.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from ds4tui.screens.dashboard import BINDINGS, DashboardScreen

if TYPE_CHECKING:
    from ds4tui.firstview import FirstView


class Ds4App(App[None]):
    """ds4tui's dashboard for one session file, of any agent (its default screen).

    `path` is the session file (it may not exist yet); `demo` shows a "demo" badge;
    `watch=False` disables the file watcher (tests drive `refresh_session()` themselves);
    `models`, `config_file`, `retrieval`, `now`, `first_view`: see `DashboardScreen`.
    """

    CSS_PATH = "styles/app.tcss"
    TITLE = "ds4tui"

    process_ends_after = False
    """Set by the CLI (`launch.run_tui`) when the process ends as soon as the app returns: the
    collector's thresholds are then not restored at unmount (with them, the teardown ran full
    collections over a 50,000-turn session's objects: ~0.7 s of the time `q` took)."""

    def __init__(self, path: Path, *, demo: bool = False, models: Any = None, watch: bool = True,
                 config_file: Path | None = None, retrieval: bool = True, now: Callable[[], float] = time.time,
                 first_view: FirstView | None = None) -> None:
        super().__init__()
        self._frame_waiters: list[Callable[[], Any]] = []
        self._frame_timer: Any = None
        self._now = now
        self._dashboard = DashboardScreen(path, demo=demo, models=models, watch=watch, config_file=config_file,
                                          retrieval=retrieval, now=now, first_view=first_view)

    FRAME_FALLBACK_S = 0.1
    """How long `after_frame` waits for a frame before it runs its callbacks anyway (seconds):
    an update that changed nothing on screen makes no frame."""

    def after_frame(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run `callback(*args)` on the UI thread once the next frame has been written to the
        terminal (after Textual's `App._display`), or after `FRAME_FALLBACK_S` when no frame comes.

        Textual's `call_after_refresh` can run before the frame of the widgets just updated: a
        widget posts its repaint to the screen from its own idle handler, and the screen may go
        idle (and run the callback) first. Work that must not delay the frame (the feed's
        `painted`, which lets a derive pass take the GIL; freeing the previous snapshot) waits
        for the frame itself here."""
        if not self._frame_waiters:
            self._frame_timer = self.set_timer(self.FRAME_FALLBACK_S, self._frame_done, name="after_frame")
        self._frame_waiters.append(partial(callback, *args))

    def _frame_done(self) -> None:
        waiters, self._frame_waiters = self._frame_waiters, []
        if self._frame_timer is not None:
            self._frame_timer.stop()
            self._frame_timer = None
        for waiter in waiters:
            waiter()

    def _display(self, screen: Screen[Any], renderable: Any) -> None:  # Textual's frame writer
        super()._display(screen, renderable)
        if self._frame_waiters and renderable is not None:
            self._frame_done()

    def get_default_screen(self) -> Screen[Any]:
        """The dashboard."""
        return self._dashboard

    @property
    def dashboard(self) -> DashboardScreen:
        """The dashboard screen (the default screen)."""
        return self._dashboard

    # the dashboard's state, read by tests and the CLI
    @property
    def snapshot(self) -> Any:
        """The snapshot on screen (None before the first)."""
        return self._dashboard.snapshot

    @property
    def derived(self) -> Any:
        """The derived views on screen (plan, cache, retrieval), or None."""
        return self._dashboard.derived

    @property
    def view(self) -> Any:
        """The view model on screen."""
        return self._dashboard.view

    @property
    def session_path(self) -> Path:
        """The session file on screen."""
        return self._dashboard.session_path

    def refresh_session(self, force: bool = False) -> None:
        """Read the file's new lines now (`SessionFeed.refresh`)."""
        self._dashboard.refresh_session(force)

    def switch_session(self, path: Path) -> None:
        """Show another session file, of any agent."""
        self._dashboard.switch_session(Path(path))

    def open_choice(self, path: Path) -> None:
        """Open a session chosen on the home screen, of any agent, in the dashboard."""
        self._dashboard.open_choice(Path(path))

    def status(self, text: str, *, error: bool = False) -> None:
        """Report on the dashboard's status line and in a notification."""
        self._dashboard.status(text, error=error)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette offers every dashboard action (by its binding's description), plus
        Textual's own commands (theme, keys, screenshot, quit)."""
        yield from super().get_system_commands(screen)
        for binding in BINDINGS:
            if isinstance(binding, Binding) and binding.action not in ("quit", "app.quit"):
                help_text = binding.tooltip or f"key: {binding.key_display or binding.key}"
                yield SystemCommand(binding.description, help_text, partial(self._dashboard.run_action, binding.action))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """One place where a failed worker becomes a visible error (never a silent stop)."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self._dashboard.status(f"{event.worker.group or 'worker'} failed: {type(error).__name__}: {error}", error=True)

    def on_unmount(self) -> None:
        feed = self._dashboard.feed
        if feed is not None:
            feed.stop(process_ends=self.process_ends_after)


def home_app(path: Path, *, lead_s: float | None = None, notify_idle: bool = False, **options: object):  # type: ignore[no-untyped-def]
    """The dashboard app for `path` that opens on the home screen (`ds4tui home`); `options` go
    to `Ds4App`. Esc from the home screen shows the dashboard of `path`. `lead_s`: the expiry notice's lead
    (seconds; default `ds4tui.screens.home.DEFAULT_LEAD_S`)."""
    from ds4tui.screens.home import DEFAULT_LEAD_S, HomeScreen

    lead_s = DEFAULT_LEAD_S if lead_s is None else lead_s

    class HomeFirst(Ds4App):
        CSS_PATH = str(Path(__file__).parent / str(Ds4App.CSS_PATH))  # relative to app.py

        def on_ready(self) -> None:
            def chosen(choice: Path | None) -> None:
                if choice is not None:
                    self.open_choice(choice)

            screen = HomeScreen(now=self._now, lead_s=lead_s, notify_idle=notify_idle)
            screen.notifier.enabled = lead_s > 0
            self.push_screen(screen, chosen)

    return HomeFirst(path, **options)  # type: ignore[arg-type]
