"""Where OpenCode keeps its files, and a model's limits as OpenCode sees them.

Paths (OpenCode 1.18.33, `global/index.ts` and `storage/db.ts` in its binary: xdg-basedir
under the app name "opencode"):

- data: `$XDG_DATA_HOME/opencode`, default `~/.local/share/opencode`; the database is
  `$OPENCODE_DB` when set (an absolute path as is, a relative one under the data folder), else
  `opencode.db` there (the "latest"/"beta"/"prod" channels; other channels use
  `opencode-<channel>.db`, which discovery lists too); logs in `log/`;
- config: `$XDG_CONFIG_HOME/opencode`, default `~/.config/opencode`;
- cache: `$XDG_CACHE_HOME/opencode`, default `~/.cache/opencode` (`models.json`, OpenCode's copy
  of models.dev; `$OPENCODE_MODELS_PATH` names a local one).

A model's limits (`limit.context`, `limit.output`, `limit.input`, tokens) come, as in
OpenCode's `Config` and `Provider` services, from the user's configuration first, later files
winning: `config.json`, `opencode.json`, `opencode.jsonc` in the config folder,
`$OPENCODE_CONFIG`, the project's `opencode.json`/`opencode.jsonc` found from the session's
directory up to `/` (the nearest last) and its `.opencode/` folder, then
`$OPENCODE_CONFIG_CONTENT`: `provider.<provider>.models.<model>.limit`; then OpenCode's model
data (`models.json`: `<provider>.models.<model>.limit`). Its compaction settings
(`compaction.auto`, `compaction.reserved`) come from the same files.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

OUTPUT_TOKEN_MAX = 32_000
"""OpenCode's cap on a request's output tokens (`ProviderTransform.OUTPUT_TOKEN_MAX`, 1.18.33)."""

COMPACTION_RESERVED_MAX = 20_000
"""OpenCode's default `compaction.reserved` cap (tokens; used with a model's `limit.input`)."""

CONFIG_NAMES = ("config.json", "opencode.json", "opencode.jsonc")
PROJECT_NAMES = ("opencode.json", "opencode.jsonc")
MAX_CONFIG_BYTES = 4 << 20


def _xdg(env: Mapping[str, str], name: str, default: str) -> Path:
    value = env.get(name)
    return Path(value).expanduser() if value and Path(value).is_absolute() else Path.home() / default


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """OpenCode's data folder (`$XDG_DATA_HOME/opencode`, default `~/.local/share/opencode`)."""
    return _xdg(os.environ if env is None else env, "XDG_DATA_HOME", ".local/share") / "opencode"


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """OpenCode's config folder (`$XDG_CONFIG_HOME/opencode`, default `~/.config/opencode`)."""
    return _xdg(os.environ if env is None else env, "XDG_CONFIG_HOME", ".config") / "opencode"


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """OpenCode's cache folder (`$XDG_CACHE_HOME/opencode`, default `~/.cache/opencode`)."""
    return _xdg(os.environ if env is None else env, "XDG_CACHE_HOME", ".cache") / "opencode"


def databases(env: Mapping[str, str] | None = None) -> list[Path]:
    """OpenCode's databases on this machine, existing ones only: `$OPENCODE_DB` when set
    (absolute, or relative to the data folder; `:memory:` is none), else `opencode.db` and the
    channel databases `opencode-*.db` of the data folder."""
    env = os.environ if env is None else env
    folder = data_dir(env)
    named = env.get("OPENCODE_DB")
    if named:
        if named == ":memory:":
            return []
        path = Path(named).expanduser()
        path = path if path.is_absolute() else folder / path
        return [path] if path.is_file() else []
    found = [folder / "opencode.db"] if (folder / "opencode.db").is_file() else []
    try:
        found += sorted(p for p in folder.glob("opencode-*.db") if p.is_file())
    except OSError:
        pass
    return found


_COMMENTS = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)
_TRAILING_COMMAS = re.compile(r'"(?:\\.|[^"\\])*"|,(?=\s*[}\]])', re.S)


def _keep_strings(match: re.Match[str]) -> str:
    return match.group(0) if match.group(0).startswith('"') else ""


def parse_jsonc(text: str) -> Any:
    """JSON with comments (`//`, `/* */`) and trailing commas, as OpenCode reads its config
    (jsonc-parser). Raises ValueError when it is not."""
    return json.loads(_TRAILING_COMMAS.sub(_keep_strings, _COMMENTS.sub(_keep_strings, text)))


def _read(path: Path) -> Any:
    try:
        if not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
            return None
        return parse_jsonc(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):
        return None


def config_files(directory: str | None, env: Mapping[str, str] | None = None) -> list[Path]:
    """The configuration files OpenCode reads for a session in `directory`, lowest precedence
    first (module doc); existing or not."""
    env = os.environ if env is None else env
    files = [config_dir(env) / name for name in CONFIG_NAMES]
    if env.get("OPENCODE_CONFIG"):
        files.append(Path(env["OPENCODE_CONFIG"]).expanduser())
    if directory and env.get("OPENCODE_DISABLE_PROJECT_CONFIG") not in ("1", "true"):
        here = Path(directory)
        chain = [here, *here.parents]
        for folder in reversed(chain):  # root first: the nearest file wins
            files += [folder / name for name in PROJECT_NAMES]
        files += [here / ".opencode" / name for name in PROJECT_NAMES]
    return files


def configs(directory: str | None, env: Mapping[str, str] | None = None) -> list[tuple[str, Mapping[str, Any]]]:
    """`(source, config)` of every configuration that applies, lowest precedence first."""
    env = os.environ if env is None else env
    out: list[tuple[str, Mapping[str, Any]]] = []
    for path in config_files(directory, env):
        data = _read(path)
        if isinstance(data, Mapping):
            out.append((str(path), data))
    content = env.get("OPENCODE_CONFIG_CONTENT")
    if content:
        try:
            data = parse_jsonc(content)
        except (ValueError, RecursionError):
            data = None
        if isinstance(data, Mapping):
            out.append(("$OPENCODE_CONFIG_CONTENT", data))
    return out


@dataclass(frozen=True)
class Limits:
    """A model's limits as OpenCode sees them (tokens; None when not given), where they come
    from (`source`: a config file, `$OPENCODE_CONFIG_CONTENT`, `models.json`, or None), and the
    compaction settings that apply (`auto`: `compaction.auto`, True unless configured off;
    `reserved`: `compaction.reserved` when configured)."""

    context: int | None = None
    output: int | None = None
    input: int | None = None
    source: str | None = None
    auto: bool = True
    reserved: int | None = None

    def usable(self) -> int | None:
        """OpenCode's overflow point in tokens (`session/overflow.ts` `usable`, 1.18.33): with
        `limit.input`, input − reserved (reserved = `compaction.reserved`, else min(20,000, max
        output)); else context − max output, where max output = min(limit.output, 32,000) (32,000
        when the limit is 0 or unknown). None without a context limit (or a context of 0: OpenCode
        never compacts then)."""
        if not self.context:
            return None
        max_output = min(self.output, OUTPUT_TOKEN_MAX) if self.output else OUTPUT_TOKEN_MAX
        if self.input:
            reserved = self.reserved if self.reserved is not None else min(COMPACTION_RESERVED_MAX, max_output)
            return max(0, self.input - reserved)
        return max(0, self.context - max_output)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _limit_in(providers: Any, provider: str, model: str) -> Mapping[str, Any] | None:
    entry = providers.get(provider) if isinstance(providers, Mapping) else None
    models = entry.get("models") if isinstance(entry, Mapping) else None
    found = models.get(model) if isinstance(models, Mapping) else None
    limit = found.get("limit") if isinstance(found, Mapping) else None
    return limit if isinstance(limit, Mapping) else None


def model_limits(provider: str | None, model: str | None, directory: str | None,
                 env: Mapping[str, str] | None = None) -> Limits:
    """The limits of `provider/model` for a session in `directory` (module doc), and the
    compaction settings. Never raises: unreadable files are skipped."""
    env = os.environ if env is None else env
    found = configs(directory, env)
    auto, reserved = True, None
    for _, data in found:
        compaction = data.get("compaction")
        if isinstance(compaction, Mapping):
            if isinstance(compaction.get("auto"), bool):
                auto = compaction["auto"]
            if _int(compaction.get("reserved")) is not None:
                reserved = _int(compaction.get("reserved"))
    if env.get("OPENCODE_DISABLE_AUTOCOMPACT") in ("1", "true"):
        auto = False
    if provider and model:
        for source, data in reversed(found):
            limit = _limit_in(data.get("provider"), provider, model)
            if limit is not None and _int(limit.get("context")) is not None:
                return Limits(_int(limit.get("context")), _int(limit.get("output")), _int(limit.get("input")), source,
                              auto, reserved)
        models_path = Path(env["OPENCODE_MODELS_PATH"]).expanduser() if env.get("OPENCODE_MODELS_PATH") else (
            cache_dir(env) / "models.json")
        data = _read(models_path)
        if isinstance(data, Mapping):
            limit = _limit_in(data, provider, model)
            if limit is not None and _int(limit.get("context")) is not None:
                return Limits(_int(limit.get("context")), _int(limit.get("output")), _int(limit.get("input")),
                              str(models_path), auto, reserved)
    return Limits(auto=auto, reserved=reserved)
