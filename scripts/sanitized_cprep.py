"""Build the C extension `_cprep` with AddressSanitizer and UndefinedBehaviorSanitizer into a
copy of the `ds4sessions` sources, for CI's sanitizer step (docs/reliability.md, issue 30).

    uv run python scripts/sanitized_cprep.py OUT_DIR

writes `OUT_DIR/ds4sessions/...` (the package's Python sources, and `_cprep` compiled with
`-fsanitize=address,undefined -fno-sanitize-recover=undefined`: any UB aborts the process) and
prints three lines for the shell: `PYTHONPATH=OUT_DIR` (it comes before the editable install's
path, so `import ds4sessions` loads the copy), `LD_PRELOAD=<libasan>` (Python itself is not built
with ASan: the runtime must be loaded first) and the module's path. Needs gcc (or `$CC`) and the
Python headers; exits 1 with the reason otherwise. The tree itself is never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "sessions" / "src" / "ds4sessions"
FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-O1", "-g",
         "-Wall", "-fPIC", "-shared"]


def build(out: Path) -> tuple[Path, Path]:
    """Copy the package to `out/ds4sessions` (no compiled files) and compile the sanitized
    `_cprep` there; returns (the module, libasan's path). Raises RuntimeError with the reason."""
    cc = os.environ.get("CC", "gcc")
    if shutil.which(cc) is None:
        raise RuntimeError(f"no C compiler ({cc}) on PATH")
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        raise RuntimeError(f"no Python headers in {include}")
    target = out / "ds4sessions"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(SOURCES, target, ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    module = target / "agents" / "pi" / f"_cprep{sysconfig.get_config_var('EXT_SUFFIX')}"
    source = SOURCES / "agents" / "pi" / "_cprep.c"
    done = subprocess.run([cc, *FLAGS, f"-I{include}", str(source), "-o", str(module)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{cc} failed:\n{done.stderr[-4000:]}")
    asan = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not asan or not Path(asan).exists():
        raise RuntimeError(f"{cc} has no libasan.so (-print-file-name gave {asan!r})")
    return module, Path(asan).resolve()


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: sanitized_cprep.py OUT_DIR")
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    try:
        module, asan = build(out)
    except RuntimeError as err:
        print(f"sanitized_cprep: {err}", file=sys.stderr)
        sys.exit(1)
    print(f"PYTHONPATH={out}")
    print(f"LD_PRELOAD={asan}")
    print(f"MODULE={module}")


if __name__ == "__main__":
    main()
