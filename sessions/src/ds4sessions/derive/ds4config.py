"""Reading the user's DS4 configuration the way DS4 does (DS4 config-loader.ts, 0.3.x).

Sources, in order, each merged over the previous result (`ds4core.config.apply_source`):

1. DS4's defaults;
2. the global file `<agentDir>/ds4-context.json` (`agentDir` as Pi resolves it:
   `ds4sessions.agents.pi.discovery.agent_dir()`);
3. the project file `<cwd>/.pi/ds4-context.json` of the session's working directory, only when
   Pi trusts that project (`project_trusted`); an untrusted project's file is skipped with the
   warning `<path>: project configuration skipped because the project is not trusted`.

An explicit file (`ds4tui plan --config FILE`) replaces steps 2-3: the plan then depends on that
file alone. Unknown keys and wrong-typed values are ignored with a warning; a source that is not
valid JSON, or whose merged result fails DS4's validation, is ignored whole with a warning. No
function here raises for bad configuration content.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ds4core.budgets import ContextConfig
from ds4core.calibration import ModelAwarenessConfig
from ds4core.config import Ds4Config, apply_source

from ds4sessions.agents.pi.discovery import agent_dir

__all__ = [
    "CONFIG_FILE_NAME",
    "LoadedDs4Config",
    "load_ds4_config",
    "project_trusted",
]

CONFIG_FILE_NAME = "ds4-context.json"
"""DS4's configuration file name, global and per project."""
PROJECT_CONFIG_DIR = ".pi"
"""Pi's per-project configuration folder (`CONFIG_DIR_NAME`)."""
_TRUST_REQUIRING = ("settings.json", "extensions", "skills", "prompts", "themes", "SYSTEM.md", "APPEND_SYSTEM.md")


@dataclass(frozen=True)
class LoadedDs4Config:
    """The effective DS4 configuration and where it came from.

    `loaded_files` are the sources applied, in order; `warnings` are DS4-style messages, each
    prefixed with its file; `project_trusted` is None when no project was looked at (no cwd, or
    an explicit file).
    """

    config: Ds4Config
    loaded_files: tuple[Path, ...] = ()
    warnings: tuple[str, ...] = ()
    global_path: Path | None = None
    project_path: Path | None = None
    project_trusted: bool | None = None

    @property
    def context(self) -> ContextConfig:
        """The planner's `context` settings."""
        return self.config.context_config()

    @property
    def awareness(self) -> ModelAwarenessConfig:
        """The `modelAwareness` settings."""
        return self.config.awareness_config()


def _canonical(path: Path) -> Path:
    try:
        return path.expanduser().resolve()
    except OSError:
        return Path(os.path.abspath(path.expanduser()))


def _has_trust_requiring_resources(cwd: Path) -> bool:
    """Pi 1.x `hasTrustRequiringProjectResources`: `.pi/` holds settings, extensions, skills,
    prompts, themes or a system prompt file, or `cwd` or an ancestor up to the home folder holds
    `.agents/skills` (the user's own `~/.agents/skills` excepted)."""
    home = _canonical(Path.home())
    config_dir = cwd / PROJECT_CONFIG_DIR
    if any((config_dir / name).exists() for name in _TRUST_REQUIRING):
        return True
    current = cwd
    while True:
        skills = current / ".agents" / "skills"
        if skills != home / ".agents" / "skills" and skills.exists():
            return True
        if current.parent == current or current == home:
            return False
        current = current.parent


def _read_json(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))


def project_trusted(cwd: Path, agent: Path | None = None) -> bool:
    """Whether Pi trusts the project folder `cwd` (Pi 1.x `trust-manager.ts`, without the
    interactive prompt and extension votes):

    1. a folder with no trust-requiring resources is trusted (a lone `.pi/ds4-context.json` is
       not such a resource);
    2. else the nearest decision for `cwd` or an ancestor in `<agentDir>/trust.json`
       (`{"<absolute path>": true|false}`);
    3. else `defaultProjectTrust == "always"` in `<agentDir>/settings.json`.
    An unreadable trust or settings file counts as no decision. Never raises.
    """
    agent = agent if agent is not None else agent_dir()
    folder = _canonical(cwd)
    if not _has_trust_requiring_resources(folder):
        return True
    try:
        decisions = _read_json(agent / "trust.json")
    except (OSError, ValueError):
        decisions = {}
    if isinstance(decisions, dict):
        current = folder
        while True:
            value = decisions.get(str(current))
            if isinstance(value, bool):
                return value
            if current.parent == current:
                break
            current = current.parent
    try:
        settings = _read_json(agent / "settings.json")
    except (OSError, ValueError):
        return False
    return isinstance(settings, dict) and settings.get("defaultProjectTrust") == "always"


def _apply_file(config: Ds4Config, path: Path, warnings: list[str]) -> tuple[Ds4Config, bool]:
    if not path.is_file():
        return config, False
    try:
        source = _read_json(path)
    except (OSError, ValueError) as exc:
        warnings.append(f"{path}: configuration ignored: {exc}")
        return config, False
    config, messages, applied = apply_source(config, source, str(path))
    warnings.extend(messages)
    return config, applied


def load_ds4_config(
    cwd: str | Path | None = None,
    *,
    config_file: Path | None = None,
    agent: Path | None = None,
    trusted: bool | None = None,
) -> LoadedDs4Config:
    """The effective DS4 configuration for a session whose working directory is `cwd`.

    Args:
        cwd: the session's working directory (`PiSession.cwd`); None skips the project file.
        config_file: an explicit file used instead of the global and project files; a missing
            one is reported as a warning and the defaults apply.
        agent: Pi's agent directory (default `discovery.agent_dir()`).
        trusted: force the project trust decision (default: `project_trusted`).

    Never raises for missing, unreadable or invalid files: they become `warnings`.
    """
    config = Ds4Config()
    warnings: list[str] = []
    loaded: list[Path] = []
    if config_file is not None:
        path = Path(config_file).expanduser()
        if not path.is_file():
            return LoadedDs4Config(config, warnings=(f"{path}: configuration file not found; DS4 defaults used",))
        config, applied = _apply_file(config, path, warnings)
        return LoadedDs4Config(config, tuple([path] if applied else []), tuple(warnings))
    agent = agent if agent is not None else agent_dir()
    global_path = agent / CONFIG_FILE_NAME
    config, applied = _apply_file(config, global_path, warnings)
    if applied:
        loaded.append(global_path)
    project_path = None
    is_trusted = None
    if cwd:
        project_path = Path(cwd) / PROJECT_CONFIG_DIR / CONFIG_FILE_NAME
        is_trusted = trusted if trusted is not None else project_trusted(Path(cwd), agent)
        if is_trusted:
            config, applied = _apply_file(config, project_path, warnings)
            if applied:
                loaded.append(project_path)
        elif project_path.exists():
            warnings.append(f"{project_path}: project configuration skipped because the project is not trusted")
    return LoadedDs4Config(config, tuple(loaded), tuple(warnings), global_path, project_path, is_trusted)


DS4_PACKAGE_MARKERS = ("ds4-context-engine", "ds4-context")
"""Substrings that name DS4's Pi package in `settings.json` `packages`/`extensions` entries or
in an extension file/folder name (the package is `Alucard24/ds4-context-engine`, spec §0)."""


def _settings_mention_ds4(path: Path) -> bool:
    try:
        settings = _read_json(path)
    except (OSError, ValueError):
        return False
    if not isinstance(settings, dict):
        return False
    for key in ("packages", "extensions"):
        for item in settings.get(key) or ():
            text = item if isinstance(item, str) else json.dumps(item) if isinstance(item, dict) else ""
            if any(marker in text for marker in DS4_PACKAGE_MARKERS):
                return True
    return False


def _extension_dir_mentions_ds4(folder: Path) -> bool:
    try:
        return any(any(m in child.name for m in DS4_PACKAGE_MARKERS) for child in folder.iterdir())
    except OSError:
        return False


def ds4_active(loaded: LoadedDs4Config | None, cwd: str | Path | None = None, agent: Path | None = None) -> bool:
    """Whether DS4 shapes what Pi sends for this session (so ds4tui opens the map on DS4's plan).

    True when a DS4 configuration file was loaded (`loaded.loaded_files`, global or project
    `ds4-context.json`), or Pi's `settings.json` (global `<agentDir>/settings.json`, or the
    project's `<cwd>/.pi/settings.json`) lists DS4's package under `packages` or `extensions`,
    or an extension folder (`<agentDir>/extensions`, `<cwd>/.pi/extensions`) holds an entry whose
    name contains `DS4_PACKAGE_MARKERS`. Never raises (unreadable files count as absent).
    """
    if loaded is not None and loaded.loaded_files:
        return True
    agent = agent if agent is not None else agent_dir()
    places = [agent]
    if cwd:
        places.append(Path(cwd) / PROJECT_CONFIG_DIR)
    return any(
        _settings_mention_ds4(place / "settings.json") or _extension_dir_mentions_ds4(place / "extensions")
        for place in places
    )
