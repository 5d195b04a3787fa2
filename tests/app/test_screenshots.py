"""The README screenshot is the app as it is now (scripts/screenshots.py)."""

from __future__ import annotations

import importlib.util
import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "screenshots.py"


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("screenshots_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_readme_screenshot_is_not_stale() -> None:
    script = _script()
    want = script.normalize(await script.render_dashboard())
    have = script.normalize((ROOT / "screenshots" / "dashboard.svg").read_text(encoding="utf-8"))
    assert want == have, "screenshots/dashboard.svg is stale: run `uv run python scripts/screenshots.py`"


def test_help_writes_nothing(tmp_path: Path) -> None:
    svg = ROOT / "screenshots" / "dashboard.svg"
    before = svg.stat().st_mtime_ns
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--check" in out.stdout and "usage:" in out.stdout
    assert svg.stat().st_mtime_ns == before


def _png_rows(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGBA bytes) of an 8-bit RGBA or RGB, non-interlaced PNG (what
    rsvg-convert writes); rows are unfiltered (PNG spec §9)."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0
    bpp = 4 if colour == 6 else 3
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pred = (a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c)
            line[i] = (line[i] + (0, a, b, (a + b) // 2, pred)[kind]) & 0xFF
        rows.append(bytes(line if bpp == 4 else b"".join(bytes(line[i:i + 3]) + b"\xff" for i in range(0, stride, 3))))
        prev = line
    return width, height, rows


@pytest.mark.skipif(shutil.which("rsvg-convert") is None, reason="rsvg-convert is not installed (Debian: librsvg2-bin)")
def test_the_png_keeps_the_leading_spaces_of_every_text_run(tmp_path: Path) -> None:
    """Rich exports a cell's space as U+00A0; librsvg dropped the leading ones of each text run
    ("^pp alette", child rows without their indentation). Two lines of a real Rich export, one
    indented by 4 cells: in the PNG its first inked pixel is 4 cells (4 × 12.2 px) further right."""
    from rich.console import Console

    console = Console(record=True, width=20, file=io.StringIO(), color_system="truecolor")
    console.print("edit", style="white on black")
    console.print("    edit", style="white on black")
    svg = tmp_path / "two.svg"
    svg.write_text(console.export_svg(title="t"), encoding="utf-8")
    png = _script().svg_to_png(svg)
    assert png == tmp_path / "two.png"
    width, height, rows = _png_rows(png.read_bytes())

    def first_ink(line_index: int) -> int:
        top = round(41 + 24.4 * line_index)  # Rich's export: the terminal's first line at y ≈ 41 px, 24.4 px each
        xs = [x for row in rows[top:top + 24] for x in range(width)
              if row[4 * x + 3] == 255 and min(row[4 * x:4 * x + 3]) > 150]  # the light glyphs, opaque
        assert xs, f"no text on line {line_index}"
        return min(xs)

    shift = first_ink(1) - first_ink(0)
    assert abs(shift - 4 * 12.2) < 6, shift
