"""Installing the ds4tui bridge extension into Pi (`<agentDir>/extensions/ds4tui-bridge.ts`) and
removing it and its channels. See `ds4sessions.bridge.channel` for the protocol.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path


from ds4sessions.agents.pi.discovery import agent_dir

EXTENSION_FILE = "ds4tui-bridge.ts"
"""File name of the extension, in the repository (`bridge/pi/`) and in `<agentDir>/extensions/`."""


def extension_source() -> Path:
    """The extension file shipped with ds4tui: `$DS4TUI_BRIDGE_SOURCE`, else the copy inside this
    package (`ds4sessions/bridge/ds4tui-bridge.ts`, in a checkout and in an installed wheel alike).
    Raises FileNotFoundError when none exists."""
    env = os.environ.get("DS4TUI_BRIDGE_SOURCE")
    if env:
        path = Path(env).expanduser()
    else:
        path = Path(__file__).resolve().parent / EXTENSION_FILE
    if not path.is_file():
        raise FileNotFoundError(f"the bridge extension is not at {path} (set DS4TUI_BRIDGE_SOURCE to its path)")
    return path


def installed_path(agent: Path | None = None) -> Path:
    """Where `install` puts the extension: `<agentDir>/extensions/ds4tui-bridge.ts` (a location Pi
    auto-discovers; Pi extensions doc, "Extension Locations")."""
    return (agent or agent_dir()) / "extensions" / EXTENSION_FILE


@dataclass(frozen=True)
class InstallResult:
    """`path` written; `previous`: "none" (new), "same" (identical file was there) or "replaced"."""

    path: Path
    previous: str

    def describe(self) -> str:
        """One line for the CLI."""
        what = {"none": "installed", "same": "already installed (unchanged)", "replaced": "updated"}[self.previous]
        return f"{what}: {self.path} (Pi loads it at its next start or /reload)"


def install(agent: Path | None = None) -> InstallResult:
    """Copy the extension into `<agentDir>/extensions/` (folders created). Raises
    FileNotFoundError (no source) or OSError."""
    source = extension_source()
    target = installed_path(agent)
    data = source.read_bytes()
    previous = "none"
    if target.exists():
        previous = "same" if target.read_bytes() == data else "replaced"
    if previous != "same":
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    return InstallResult(target, previous)


def uninstall(agent: Path | None = None) -> Path | None:
    """Remove the installed extension; returns the removed path, or None when it was not
    installed. A running Pi keeps the loaded copy until it restarts or reloads. The channel
    folders stay (`<agentDir>/ds4tui/`; remove them with `purge_channels`)."""
    target = installed_path(agent)
    if not target.exists():
        return None
    target.unlink()
    return target


def purge_channels(agent: Path | None = None) -> Path | None:
    """Delete every channel folder (`<agentDir>/ds4tui/`); returns it, or None when absent."""
    root = (agent or agent_dir()) / "ds4tui"
    if not root.exists():
        return None
    shutil.rmtree(root)
    return root
