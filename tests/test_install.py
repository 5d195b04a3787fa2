"""The install path a user takes outside a checkout (issue 16): build every distribution, build
each wheel from its sdist, install the wheels into a clean virtual environment (no workspace) and
with `uv tool install`, then run the installed `ds4tui`.

Needs `uv` on PATH (CI installs it) and the package registry for the third-party dependencies
(uv's cache serves them when warm). Skips with the reason when uv is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT

pytestmark = pytest.mark.slow

UV = shutil.which("uv")
PACKAGES = ("ds4core", "ds4sessions", "ds4tui")


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH")}
    env.update(
        UV_PYTHON_DOWNLOADS="never",
        PI_CODING_AGENT_DIR=str(tmp / "pi-agent"),
        DS4TUI_STATE_DIR=str(tmp / "state"),
        HOME=str(tmp / "home"),
        UV_CACHE_DIR=os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv"),
    )
    return env


def _run(args: list[str], tmp: Path, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, cwd=cwd, env=_env(tmp), capture_output=True, text=True, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdists and wheels of the three packages; each wheel built from its sdist."""
    if UV is None:
        pytest.skip("uv is not on PATH (pip install uv)")
    out = tmp_path_factory.mktemp("dist")
    tmp = tmp_path_factory.mktemp("build-env")
    built = _run([UV, "build", "--all-packages", "--sdist", "-o", str(out)], tmp, ROOT)
    BUILD_OUTPUT.append(built.stdout + built.stderr)
    for package in PACKAGES:
        sdist = out / f"{package}-0.1.0.tar.gz"
        assert sdist.is_file(), f"no sdist for {package}"
        built = _run([UV, "build", "--wheel", "-o", str(out), str(sdist)], tmp, out)
        BUILD_OUTPUT.append(built.stdout + built.stderr)
    return out


BUILD_OUTPUT: list[str] = []
"""What each `uv build` of `dists` printed (stdout + stderr)."""


def test_the_builds_print_a_screenful_not_every_file(dists: Path) -> None:
    """setuptools at its default log level printed ~370 lines per build of ds4sessions ("adding
    '…'", "copying …"); sessions/setup.cfg keeps its warnings only."""
    lines = [line for text in BUILD_OUTPUT for line in text.splitlines() if line.strip()]
    assert not [line for line in lines if line.startswith(("adding '", "copying "))]
    assert len(lines) < 40, "\n".join(lines)


def _wheel(dists: Path, package: str) -> Path:
    """The package's wheel: pure Python (`py3-none-any`), or for ds4sessions, which holds an
    optional C extension (sessions/setup.py), tagged for this interpreter and platform."""
    (wheel,) = dists.glob(f"{package}-0.1.0-*.whl")
    return wheel


def test_each_wheel_builds_from_its_sdist_and_ships_its_data(dists: Path) -> None:
    names = {p: zipfile.ZipFile(_wheel(dists, p)).namelist() for p in PACKAGES}
    assert "ds4core/data/models.json" in names["ds4core"]
    assert "ds4sessions/bridge/ds4tui-bridge.ts" in names["ds4sessions"]
    assert {"ds4tui/data/demo-session.jsonl", "ds4tui/styles/app.tcss"} <= set(names["ds4tui"])
    # the app's sdist is the app: the other packages are distributions of their own
    members = tarfile.open(dists / "ds4tui-0.1.0.tar.gz").getnames()
    assert not [m for m in members if m.split("/")[1] in ("core", "sessions", "tests", "bench")]


def _check_installed(ds4tui: Path, tmp: Path) -> None:
    version = _run([str(ds4tui), "--version"], tmp, tmp)
    assert version.stdout.strip() == "ds4tui 0.1.0 (ds4core 0.1.0, ds4sessions 0.1.0)"
    mapped = _run([str(ds4tui), "map", "--json", str(FIXTURES / "pi" / "01-tools-and-image.jsonl")], tmp, tmp)
    assert json.loads(mapped.stdout)["contextWindow"] == 200000
    status = _run([str(ds4tui), "bridge", "status", "--json", str(FIXTURES / "pi" / "01-tools-and-image.jsonl")], tmp, tmp, check=False)
    assert status.returncode == 3, status.stderr  # installed ds4tui, no Pi running: not live
    shipped = json.loads(status.stdout)["shipped"]
    assert shipped and "site-packages" in shipped and Path(shipped).read_text().startswith("/**")
    # install puts the shipped extension where Pi loads it
    _run([str(ds4tui), "bridge", "install"], tmp, tmp)
    assert (tmp / "pi-agent" / "extensions" / "ds4tui-bridge.ts").read_bytes() == Path(shipped).read_bytes()


def test_wheels_install_into_a_clean_venv(dists: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([UV, "venv", "-q", "--python", sys.executable, str(venv)], tmp_path, tmp_path)
    python = venv / "bin" / "python"
    _run([UV, "pip", "install", "-q", "--python", str(python), *(str(_wheel(dists, p)) for p in PACKAGES)], tmp_path, tmp_path)
    _check_installed(venv / "bin" / "ds4tui", tmp_path)


def test_uv_tool_install_from_the_wheels(dists: Path, tmp_path: Path) -> None:
    tools, bin_dir = tmp_path / "tools", tmp_path / "bin"
    env_extra = ["--python", sys.executable]
    args = [
        UV, "tool", "install", "--compile-bytecode", *env_extra, str(_wheel(dists, "ds4tui")),
        "--with", str(_wheel(dists, "ds4core")), "--with", str(_wheel(dists, "ds4sessions")),
    ]
    env = _env(tmp_path) | {"UV_TOOL_DIR": str(tools), "UV_TOOL_BIN_DIR": str(bin_dir)}
    result = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    _check_installed(bin_dir / "ds4tui", tmp_path)
    # as the README installs it: the dependencies' bytecode is written once, at install
    assert list(tools.glob("ds4tui/lib/python*/site-packages/typer/__pycache__/*.pyc"))


def test_uv_run_in_the_checkout_prints_nothing_of_its_own(tmp_path: Path) -> None:
    """`uv run` in the checkout adds no line to the command's output once the environment is in
    sync. `compile-bytecode = true` in `[tool.uv]` made every `uv run` re-check and print
    "Bytecode compiled 1485 files" (astral-sh/uv#12202: the setting applies at every sync, and
    `uv run` syncs); the dependencies are compiled at install instead (`uv sync
    --compile-bytecode`, .ci/run and the README)."""
    if UV is None:
        pytest.skip("uv is not on PATH (pip install uv)")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_COMPILE_BYTECODE")}
    command = [UV, "run", "--project", str(ROOT), "python", "-c", "print('ok')"]
    subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=True)  # in sync
    again = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=True)
    assert (again.stdout, again.stderr) == ("ok\n", "")
