#!/usr/bin/env python3
"""`ds4tui map --json` (and `--fast`) output, recorded once and compared later, byte for byte.

    uv run python bench/check_map_identical.py --record DIR   # on the reference commit
    uv run python bench/check_map_identical.py --check DIR    # after a change

Inputs: every `*.jsonl` of `$DS4TUI_SHARED/sessions-pi` and `$DS4TUI_SHARED/bad-inputs` (the
files that are not Pi sessions go through the Typer CLI; they are compared too) and the
bench's synthetic sessions `bench/out/synthetic-{1000,10000,50000}.jsonl` (made by
`bench/bench_cold.py` if missing). Each input runs in a fresh `.venv/bin/ds4tui` process, in
both modes; stdout, stderr and the exit status are recorded (`DIR/<n>.<mode>.out|err|rc`) or
compared with the recording (the bench's own files by their path in the checkout, with the
checkout's folder left out of the output, so a recording made in another worktree applies).
Prints one line per difference and the count of identical runs;
exits 1 on any difference or missing recording.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DS4TUI = ROOT / ".venv" / "bin" / "ds4tui"
SIZES = (1000, 10000, 50000)


def inputs() -> list[Path]:
    """The files compared, in a fixed order."""
    shared = Path(os.environ.get("DS4TUI_SHARED", ROOT.parent / "shared"))
    files = sorted((shared / "sessions-pi").glob("*.jsonl")) + sorted((shared / "bad-inputs").glob("*.jsonl"))
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_cold import OUT, synthetic

    OUT.mkdir(parents=True, exist_ok=True)
    return files + [synthetic(n) for n in SIZES]


def run(path: Path, fast: bool) -> tuple[bytes, bytes, int]:
    """stdout, stderr and exit status of `ds4tui map --json [--fast] PATH`."""
    argv = [str(DS4TUI), "map", "--json", *(["--fast"] if fast else []), str(path)]
    proc = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, check=False)
    return proc.stdout, proc.stderr, proc.returncode


def main() -> int:
    """Record or check; see the module doc."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path)
    mode.add_argument("--check", type=Path)
    args = parser.parse_args()
    folder: Path = args.record or args.check
    folder.mkdir(parents=True, exist_ok=True)
    same = differ = 0
    for path in inputs():
        key = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path  # (a bench file: the same in any worktree)
        name = hashlib.sha1(str(key).encode()).hexdigest()[:12]
        for fast in (False, True):
            stem = folder / f"{name}.{'fast' if fast else 'exact'}"
            out, err, rc = run(path, fast)
            out = out.replace(str(ROOT).encode(), b"<checkout>")  # (a bench file's path is printed)
            if args.record:
                stem.with_suffix(stem.suffix + ".out").write_bytes(out)
                stem.with_suffix(stem.suffix + ".err").write_bytes(err)
                stem.with_suffix(stem.suffix + ".rc").write_text(str(rc))
                (folder / f"{name}.path").write_text(str(path))
                print(f"recorded {path.name} {'--fast' if fast else 'exact'}: exit {rc}, {len(out):,} bytes")
                same += 1
                continue
            try:
                want = (
                    stem.with_suffix(stem.suffix + ".out").read_bytes(),
                    stem.with_suffix(stem.suffix + ".err").read_bytes(),
                    int(stem.with_suffix(stem.suffix + ".rc").read_text()),
                )
            except OSError:
                print(f"MISSING recording for {path} {'--fast' if fast else 'exact'}")
                differ += 1
                continue
            if (out, err, rc) == want:
                same += 1
            else:
                differ += 1
                what = [k for k, a, b in zip(("stdout", "stderr", "exit"), (out, err, rc), want) if a != b]
                print(f"DIFFERENT {path} {'--fast' if fast else 'exact'}: {', '.join(what)}")
    print(f"{'recorded' if args.record else 'identical'}: {same} runs; different or missing: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
