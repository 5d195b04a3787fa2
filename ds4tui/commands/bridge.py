"""`ds4tui bridge install|uninstall|status`: the Pi extension that lets ds4tui steer a running Pi.

`install` copies the extension shipped inside ds4sessions (`ds4sessions/bridge/ds4tui-bridge.ts`) into `<agentDir>/extensions/` (Pi loads it at its
next start or `/reload`); `uninstall` removes it; `status` says whether it is installed and, for
a session (default: the newest), whether a live bridge answers. See docs/bridge.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ds4tui.text import literal

NAMES = {"bridge"}

bridge_app = typer.Typer(help="Install, remove or check the ds4tui bridge inside Pi.", no_args_is_help=True)


def install_cmd() -> None:
    """Copy the bridge extension into Pi's agent dir (`<agentDir>/extensions/`)."""
    from ds4sessions.bridge.channel import install

    try:
        result = install()
    except OSError as err:  # FileNotFoundError included: no extension source
        typer.echo(f"ds4tui: bridge not installed: {literal(str(err), keep_newlines=False)}", err=True)
        raise typer.Exit(1) from None
    typer.echo(literal(result.describe(), keep_newlines=False))


def uninstall_cmd(
    purge: Annotated[bool, typer.Option("--purge", help="Also delete the channel folders (<agentDir>/ds4tui/)")] = False,
) -> None:
    """Remove the bridge extension (a running Pi keeps its loaded copy until restart or /reload)."""
    from ds4sessions.bridge.channel import installed_path, purge_channels, uninstall

    removed = uninstall()
    typer.echo(f"removed {removed}" if removed else f"not installed ({installed_path()} does not exist)")
    if purge:
        folder = purge_channels()
        typer.echo(f"removed {folder}" if folder else "no channel folders")


def status_cmd(
    path: Annotated[Path | None, typer.Argument(help="A Pi session .jsonl file (default: the newest session)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output")] = False,
) -> None:
    """Is the bridge installed, and does a live bridge answer for the session? Also names the
    extension file shipped with ds4tui (what `install` copies). Exit 0 when live, 3 otherwise."""
    from ds4sessions.bridge.channel import extension_source, installed_path, status
    from ds4sessions.agents.pi.discovery import newest_session, read_header

    if path is None:
        path = newest_session()
    session_id = None
    if path is not None:
        header = read_header(path)
        session_id = header.get("id") if header else None
        if session_id is None:
            typer.echo(f"ds4tui: {path}: not a Pi session (no header)", err=True)
            raise typer.Exit(2)
    try:
        state = status(session_id)
    except ValueError as err:  # a header id Pi would not write
        typer.echo(f"ds4tui: {literal(str(err), keep_newlines=False)}", err=True)
        raise typer.Exit(2) from None
    try:
        shipped: str | None = str(extension_source())
    except FileNotFoundError:
        shipped = None
    if as_json:
        beat = state.heartbeat
        typer.echo(json.dumps({
            "state": state.state, "installed": state.installed, "extension": str(installed_path()),
            "shipped": shipped,
            "session": str(path) if path else None, "sessionId": session_id, "reason": state.reason,
            "heartbeatAge": state.age, "pid": beat.pid if beat else None, "leafId": beat.leaf_id if beat else None,
            "idle": beat.idle if beat else None,
        }))
    else:
        typer.echo(f"shipped:   {shipped or 'missing (this ds4tui install has no bridge extension)'}")
        typer.echo(f"extension: {installed_path()} ({'installed' if state.installed else 'not installed'})")
        if path is not None:
            typer.echo(literal(f"session: {path}", keep_newlines=False))
        typer.echo(literal(f"{state.header} — {state.reason}", keep_newlines=False))
    raise typer.Exit(0 if state.live else 3)


def register(app: typer.Typer) -> set[str]:
    """Add the `bridge` group (`install`, `uninstall`, `status`) to `app`; returns its name."""
    bridge_app.command("install")(install_cmd)
    bridge_app.command("uninstall")(uninstall_cmd)
    bridge_app.command("status")(status_cmd)
    app.add_typer(bridge_app, name="bridge")
    return NAMES
