#!/usr/bin/env python3
"""Write ds4tui's bundled demo session, `ds4tui/data/demo-session.jsonl`.

The demo is an invented Pi session (format version 3, shaped like the files
@earendil-works/pi-coding-agent 1.6.0 writes; Pi session format §3-§10): a developer asks the
agent to fix heading-anchor false positives in `mdlinks`, a small Python link checker, add a
`--format json` output, fix the docs, survive a manual `/compact`, and release. Everything is our
own text. The output is deterministic: one seeded `random.Random`, no clock, no network.

    uv run python scripts/make_demo_session.py [-o PATH]

How the file is built:

- The project is a dict of file texts (`PROJECT`). `read` results come from it, `edit` and
  `write` change it (with Pi's `details.diff`/`patch`/`firstChangedLine` for edits), and the
  `git diff`/`git status`/pytest outputs are computed from it, so the tool results agree.
- The dialogue is data (`SCRIPT`): user turns with the agent's steps, plus the special entries
  (aborted reply, `!` command, session name, `ds4:pin` label, compaction).
- Usage follows the Anthropic prompt cache: prompt tokens = system prompt + tools + ceil(chars/4)
  of each context message (Pi's `estimateTokens` rule); while the cache is warm (last request
  under 5 minutes ago) `cacheRead` is the previous request's prompt, `cacheWrite` the new part,
  `input` a few tokens; after the 7-minute pause everything is written again. After the
  compaction only the system prompt and tools are still cached.
- Costs use claude-sonnet-4-5's catalog prices (USD per million tokens) the way pi-ai computes
  them: price / 1e6 × tokens per bucket, total = input + output + cacheRead + cacheWrite.
- The compaction keeps the last turn. Its `firstKeptEntryId` is what Pi's cut-point rule gives
  with the project setting `compaction.keepRecentTokens` = `KEEP_RECENT_TOKENS` (Pi session
  format §9); the script checks this.
"""

from __future__ import annotations

import argparse
import ast
import base64
import difflib
import hashlib
import math
import random
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ds4core.jsjson import stringify, utf16_len

OUT = Path(__file__).resolve().parents[1] / "ds4tui" / "data" / "demo-session.jsonl"
SEED = 41_2026
START_MS = 1_773_306_847_312  # 2026-03-12T09:14:07.312Z
CWD = "/home/dev/projects/mdlinks"
PROVIDER, MODEL, API = "anthropic", "claude-sonnet-4-5", "anthropic-messages"
THINKING_LEVEL = "medium"
PRICES = {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}
"""claude-sonnet-4-5 catalog prices, USD per million tokens (pi-ai 1.6.0)."""
CACHE_TTL_MS = 300_000
"""Anthropic short prompt-cache lifetime (5 minutes)."""
KEEP_RECENT_TOKENS = 2_000
"""The session's `compaction.keepRecentTokens` (a project setting; Pi's default is 20000)."""


def src(text: str) -> str:
    """A file body written indented in this script: dedented, without the first newline."""
    return textwrap.dedent(text).lstrip("\n")


# --------------------------------------------------------------------------------------------
# The project on disk when the session starts (branch fix-anchors, clean working tree).
# --------------------------------------------------------------------------------------------

PROJECT: dict[str, str] = {
    ".github/workflows/ci.yml": src("""
        name: ci
        on: [push, pull_request]
        jobs:
          test:
            strategy:
              matrix:
                os: [ubuntu-latest, windows-latest]
                python: ["3.11", "3.13"]
            runs-on: ${{ matrix.os }}
            steps:
              - uses: actions/checkout@v4
              - uses: actions/setup-python@v5
                with:
                  python-version: ${{ matrix.python }}
              - run: pip install -e '.[test]'
              - run: python -m pytest -q
              - run: python -m mdlinks README.md docs
        """),
    ".gitignore": "__pycache__/\n*.egg-info/\n.venv/\n.pytest_cache/\n",
    "AGENTS.md": src("""
        # Working on mdlinks

        mdlinks checks relative links and heading anchors in Markdown documentation.
        It is a small, dependency-free Python package (3.11+), used in CI by several
        internal doc repositories, so its output format is part of its interface.

        ## Layout

        - `src/mdlinks/slugs.py`: heading text to GitHub-style anchor ids.
        - `src/mdlinks/scanner.py`: link extraction, target resolution, anchor lookup.
        - `src/mdlinks/cli.py`: argument parsing and output; keep logic out of it.
        - `tests/`: pytest, one file per module. Tests build small doc trees in `tmp_path`.
        - `docs/`: the user documentation, itself checked by mdlinks in CI.

        ## Rules

        - Run `python -m pytest -q` before you say something is done.
        - No runtime dependencies. Standard library only.
        - Anchors must match what github.com renders. When unsure, add a test with the
          heading and the anchor GitHub produces, and say so in a comment.
        - Exit codes: 0 all links fine, 1 broken links found, 2 usage error. CI scripts
          rely on them.
        - Paths in machine-readable output use forward slashes on every OS.
        - Keep functions short and typed; docstrings say what is returned.
        - Commit messages: `area: imperative summary`, e.g. `slugs: keep repeated hyphens`.
        - Do not push; the user pushes after reviewing.

        ## GitHub anchor rules (what we have verified on github.com)

        - The anchor is built from the rendered heading text: link text instead of the
          link, code spans without backticks, emphasis markers removed.
        - Lower-case; remove every character that is not a letter, digit, space, hyphen
          or underscore (Unicode letters stay); then each space becomes one hyphen.
          Hyphens are never merged or trimmed.
        - Repeated anchors in one document get `-1`, `-2`, ... in order of appearance.
        - Setext headings and HTML `id` attributes also create anchors; we do not
          support them yet (see docs/guide.md, Limits).

        ## Tests

        - A bug fix starts with a failing test; name the issue number in a comment.
        - Build doc trees in `tmp_path`; never write into the repository from a test.
        - The whole suite runs in well under a second. Keep it that way: no network,
          no sleeping, no subprocesses when calling `main()` directly will do.
        - Prefer exact expected strings over `in` checks for anything a user sees.

        ## Output

        - Text mode: `file:line: target: reason`, one problem per line on stdout; the
          summary line goes to stderr.
        - Reasons are fixed strings ("file not found", "no heading for #x", "points
          outside the checked folder"). Other tools match on them; do not reword.
        - A new machine-readable format needs a version field and a test that pins its
          exact shape.

        ## Releases

        - Semantic versioning. The version is in `pyproject.toml` and in
          `src/mdlinks/__init__.py`; both must agree.
        - Every user-visible change gets a line in CHANGES.md under the next version,
          newest version first, with the issue number when there is one.
        - The user tags and publishes; agents only prepare the release commit.

        ## Style

        - `ruff format` defaults, line length 110; `from __future__ import annotations`
          at the top of every module.
        - Type hints on public functions. No leftover debug prints.
        """),
    "CHANGES.md": src("""
        # Changes

        ## 0.3.2 (2026-02-20)

        - Reference-style link definitions (`[id]: target`) are checked too.
        - Links inside `~~~` fences are ignored like those inside backtick fences.

        ## 0.3.1 (2026-01-28)

        - Fix: a link to a folder no longer reports "file not found".

        ## 0.3.0 (2026-01-09)

        - New `--root` option; links leaving the root are reported.
        - The summary line goes to standard error.

        ## 0.2.0 (2025-12-02)

        - Check `#anchor` links against GitHub-style heading anchors.

        ## 0.1.0 (2025-11-14)

        - First release: relative file links only.
        """),
    "README.md": src("""
        # mdlinks

        Check relative links and heading anchors in Markdown files, offline.

        ```sh
        pip install mdlinks
        mdlinks README.md docs/
        ```

        mdlinks prints one line per broken link and exits with status 1 when it found
        any, so it can guard a CI job. External links (`https://…`) are not fetched.

        ## Why

        Docs rot quietly: a heading gets renamed, a file moves, and the links that
        pointed at them keep rendering as links. GitHub's anchor rules are easy to get
        subtly wrong by hand (repeated headings, punctuation, inline code), so mdlinks
        applies the same rules when it checks `#fragment` links.

        ## Options

        | option | meaning |
        | --- | --- |
        | `PATH ...` | files or folders to check (default: `.`) |
        | `--root DIR` | links may not point outside `DIR` (default: `.`) |
        | `-q`, `--quiet` | print nothing when all links are fine |
        | `--version` | print the version and exit |

        ## Development

        ```sh
        pip install -e '.[test]'
        python -m pytest -q
        ```

        See [docs/guide.md](docs/guide.md) for the full guide and
        [CHANGES.md](CHANGES.md) for the release history.
        """),
    "docs/guide.md": src("""
        # mdlinks guide

        mdlinks reads Markdown files and reports links that lead nowhere: relative
        links to files that do not exist, and `#anchors` that match no heading. It
        does not fetch anything from the network; external links are skipped.

        - [Quick start](#quick-start)
        - [Checking a folder](#checking-a-folder)
        - [The `--root` option](#the---root-option)
        - [Output](#output)
        - [Exit codes](#exit-codes)

        ## Quick start

        Install it (see [the installation notes](install.md#requirements) first) and
        point it at a file or a folder:

        ```sh
        mdlinks README.md docs/
        ```

        Every broken link is printed as `file:line: target: reason`. A clean run
        prints a single summary line.

        ## Checking a folder

        When a path is a folder, mdlinks checks every `*.md` file below it, in sorted
        order. Other files are ignored, even if Markdown files link to them: a link
        to `diagram.png` only has to resolve to an existing file.

        ### Examples

        Check the whole repository from its root:

        ```sh
        mdlinks .
        ```

        Check only the docs, but allow links up to the repository root:

        ```sh
        mdlinks docs --root .
        ```

        ## The `--root` option

        Links may not leave the folder given with `--root` (default: the current
        folder). A link such as `../../other-repo/README.md` is reported as pointing
        outside the checked folder, because it would break as soon as the docs are
        published on their own.

        ## Output

        Problems go to standard output, one per line, and the summary to standard
        error, so `mdlinks docs > problems.txt` leaves you with just the problems.

        | reason | meaning |
        | --- | --- |
        | `file not found` | the target file does not exist |
        | `no heading for #x` | the file exists but has no heading with anchor `x` |
        | `points outside the checked folder` | see [the `--root` option](#the---root-option) |

        ### Examples

        ```text
        docs/guide.md:14: install.md#setup: no heading for #setup
        docs/index.md:3: tutorial.md: file not found
        2 broken link(s) in 4 file(s).
        ```

        Anchors follow the rules of github.com, including the numbered anchors of
        repeated headings: the second "Examples" heading in this file is
        [#examples-1](#examples-1).

        ## Exit codes

        | code | meaning |
        | --- | --- |
        | 0 | all links resolve |
        | 1 | at least one broken link |
        | 2 | bad command line |

        ## Limits

        - Only ATX headings (`# Title`) create anchors; setext headings
          (underlined with `===`) are not recognised yet.
        - HTML anchors (`<a id="x">`) are not recognised.
        - Links inside fenced code blocks are ignored on purpose.

        See the [changelog](../CHANGELOG.md) for what changed between releases.
        """),
    "docs/index.md": src("""
        # mdlinks documentation

        mdlinks checks that the relative links and `#anchors` in your Markdown files
        lead somewhere.

        - [Installing](install.md)
        - [Guide](guide.md)
          - [Quick start](guide.md#quick-start)
          - [Output](guide.md#output)
          - [Limits](guide.md#limits)

        The project README is one level up: [README](../README.md).
        """),
    "docs/install.md": src("""
        # Installing mdlinks

        ## System requirements

        - Python 3.11 or newer
        - No other packages; mdlinks only uses the standard library

        ## With pipx (recommended)

        ```sh
        pipx install mdlinks
        ```

        ## In a virtual environment

        ```sh
        python -m venv .venv
        . .venv/bin/activate
        pip install mdlinks
        ```

        ## In CI

        Add a step that runs mdlinks on your docs folder. It fails the job when a
        link is broken; see the [exit status](guide.md#exit-status) table for the
        codes it returns.

        ```yaml
        - name: Check Markdown links
          run: |
            pip install mdlinks
            mdlinks docs README.md
        ```

        ## From a checkout

        ```sh
        git clone https://git.example.org/tools/mdlinks.git
        cd mdlinks
        pip install -e '.[test]'
        python -m pytest -q
        ```

        Back to the [guide](guide.md) or the [index](index.md).
        """),
    "pyproject.toml": src("""
        [project]
        name = "mdlinks"
        version = "0.3.2"
        description = "Check relative links and heading anchors in Markdown files"
        readme = "README.md"
        requires-python = ">=3.11"
        license = "MIT"
        dependencies = []

        [project.optional-dependencies]
        test = ["pytest>=8"]

        [project.scripts]
        mdlinks = "mdlinks.cli:main"

        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"

        [tool.pytest.ini_options]
        testpaths = ["tests"]
        addopts = "-ra"
        """),
    "src/mdlinks/__init__.py": '"""Check relative links and heading anchors in Markdown files."""\n\n__version__ = "0.3.2"\n',
    "src/mdlinks/__main__.py": "from mdlinks.cli import main\n\nraise SystemExit(main())\n",
    "src/mdlinks/cli.py": src(r'''
        """Command line entry point: ``mdlinks [PATH ...]``."""

        from __future__ import annotations

        import argparse
        import sys
        from pathlib import Path

        from mdlinks import __version__
        from mdlinks.scanner import Checker, markdown_files


        def build_parser() -> argparse.ArgumentParser:
            """Return the argument parser (exits with status 2 on bad arguments)."""
            parser = argparse.ArgumentParser(
                prog="mdlinks",
                description="Check relative links and heading anchors in Markdown files.",
            )
            parser.add_argument(
                "paths",
                nargs="*",
                type=Path,
                default=[Path(".")],
                help="files or folders to check (default: current folder)",
            )
            parser.add_argument(
                "--root",
                type=Path,
                default=Path("."),
                help="links may not point outside this folder (default: .)",
            )
            parser.add_argument("-q", "--quiet", action="store_true", help="print nothing when all links are fine")
            parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
            return parser


        def main(argv: list[str] | None = None) -> int:
            """Check the given paths; return 0 when all links resolve, 1 otherwise."""
            args = build_parser().parse_args(argv)
            checker = Checker(args.root)
            files = list(markdown_files(args.paths))
            problems = []
            for path in files:
                problems.extend(checker.check_file(path))
            for problem in problems:
                link = problem.link
                print(f"{link.source}:{link.line}: {link.target}: {problem.reason}")
            if problems:
                print(f"{len(problems)} broken link(s) in {len(files)} file(s).", file=sys.stderr)
                return 1
            if not args.quiet:
                print(f"No broken links in {len(files)} file(s).")
            return 0
        '''),
    "src/mdlinks/scanner.py": src(r'''
        """Find Markdown links and check that their targets exist."""

        from __future__ import annotations

        import re
        from collections.abc import Iterable, Iterator
        from dataclasses import dataclass
        from pathlib import Path
        from urllib.parse import unquote

        from mdlinks.slugs import heading_text, slugify

        _INLINE_LINK = re.compile(r"(?<!!)\[(?P<label>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
        _REFERENCE_DEF = re.compile(r"^\s{0,3}\[(?P<label>[^\]]+)\]:\s*(?P<target>\S+)")
        _FENCE = re.compile(r"^\s{0,3}(```|~~~)")
        _EXTERNAL = ("http://", "https://", "mailto:", "ftp://")


        @dataclass(frozen=True)
        class Link:
            """One link found in a Markdown file (``line`` is 1-based)."""

            source: Path
            line: int
            target: str


        @dataclass(frozen=True)
        class Problem:
            """A link whose target could not be resolved, and why."""

            link: Link
            reason: str


        def _outside_fences(text: str) -> Iterator[tuple[int, str]]:
            """Yield (line number, line) for the lines that are not inside a fenced block."""
            in_fence = False
            for number, line in enumerate(text.splitlines(), start=1):
                if _FENCE.match(line):
                    in_fence = not in_fence
                    continue
                if not in_fence:
                    yield number, line


        def iter_links(path: Path, text: str) -> Iterator[Link]:
            """Yield the inline and reference links of a document, skipping images and code."""
            for number, line in _outside_fences(text):
                for match in _INLINE_LINK.finditer(line):
                    yield Link(path, number, match.group("target"))
                ref = _REFERENCE_DEF.match(line)
                if ref:
                    yield Link(path, number, ref.group("target"))


        def collect_anchors(text: str) -> set[str]:
            """Return the anchors GitHub generates for the headings of a document."""
            anchors = set()
            for _, line in _outside_fences(text):
                title = heading_text(line)
                if title is not None:
                    anchors.add(slugify(title))
            return anchors


        class Checker:
            """Checks links below ``root``, reading each target document at most once."""

            def __init__(self, root: Path) -> None:
                self.root = root.resolve()
                self._anchors: dict[Path, set[str]] = {}

            def anchors_of(self, path: Path) -> set[str]:
                """Return the heading anchors of a Markdown file (cached)."""
                if path not in self._anchors:
                    self._anchors[path] = collect_anchors(path.read_text(encoding="utf-8"))
                return self._anchors[path]

            def check_link(self, link: Link) -> Problem | None:
                """Return the problem with one link, or None when it resolves."""
                target = link.target
                if target.startswith(_EXTERNAL):
                    return None
                file_part, _, anchor = target.partition("#")
                if file_part:
                    resolved = (link.source.parent / unquote(file_part)).resolve()
                else:
                    resolved = link.source.resolve()
                if not resolved.is_relative_to(self.root):
                    return Problem(link, "points outside the checked folder")
                if not resolved.exists():
                    return Problem(link, "file not found")
                if anchor and resolved.suffix == ".md":
                    if unquote(anchor).lower() not in self.anchors_of(resolved):
                        return Problem(link, f"no heading for #{anchor}")
                return None

            def check_file(self, path: Path) -> list[Problem]:
                """Return the problems of all links in one file, in line order."""
                text = path.read_text(encoding="utf-8")
                problems = []
                for link in iter_links(path, text):
                    problem = self.check_link(link)
                    if problem is not None:
                        problems.append(problem)
                return problems


        def markdown_files(paths: Iterable[Path]) -> Iterator[Path]:
            """Expand folders to the ``*.md`` files below them (sorted); keep files as given."""
            for path in paths:
                if path.is_dir():
                    yield from sorted(path.rglob("*.md"))
                else:
                    yield path
        '''),
    "src/mdlinks/slugs.py": src(r'''
        """Heading anchors the way GitHub renders them.

        GitHub turns a Markdown heading into an ``id`` attribute: take the rendered
        text, lower-case it, drop everything that is not a letter, digit, space,
        hyphen or underscore, and replace each space with a hyphen. Links such as
        ``guide.md#quick-start`` point at these ids.
        """

        from __future__ import annotations

        import re
        import unicodedata

        _INLINE_CODE = re.compile(r"`([^`]*)`")
        _LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
        _EMPHASIS = re.compile(r"(\*\*|__|\*|_)(.+?)\1")
        _DROP = re.compile(r"[^\w\- ]")


        def heading_text(line: str) -> str | None:
            """Return the text of an ATX heading line (``## Title``), or None."""
            stripped = line.lstrip()
            if not stripped.startswith("#"):
                return None
            hashes = len(stripped) - len(stripped.lstrip("#"))
            if hashes > 6:
                return None
            rest = stripped[hashes:]
            if rest and not rest.startswith(" "):
                return None
            return rest.strip().rstrip("#").strip()


        def slugify(text: str) -> str:
            """Return GitHub's anchor for a heading text (without the leading ``#``)."""
            text = _LINK.sub(r"\1", text)
            text = _INLINE_CODE.sub(r"\1", text)
            text = _EMPHASIS.sub(r"\2", text)
            text = unicodedata.normalize("NFC", text).lower()
            text = _DROP.sub("", text)
            text = text.replace(" ", "-")
            return re.sub(r"-{2,}", "-", text).strip("-")
        '''),
    "tests/test_cli.py": src('''
        from mdlinks.cli import main


        def test_clean_docs_exit_zero(tmp_path, capsys, monkeypatch):
            (tmp_path / "a.md").write_text("# A\\n\\n[self](#a)\\n", encoding="utf-8")
            monkeypatch.chdir(tmp_path)
            assert main(["a.md"]) == 0
            assert capsys.readouterr().out == "No broken links in 1 file(s).\\n"


        def test_broken_link_exit_one(tmp_path, capsys, monkeypatch):
            (tmp_path / "a.md").write_text("[gone](gone.md)\\n", encoding="utf-8")
            monkeypatch.chdir(tmp_path)
            assert main(["a.md"]) == 1
            captured = capsys.readouterr()
            assert captured.out == "a.md:1: gone.md: file not found\\n"
            assert "1 broken link(s)" in captured.err


        def test_quiet_prints_nothing_when_clean(tmp_path, capsys, monkeypatch):
            (tmp_path / "a.md").write_text("# A\\n", encoding="utf-8")
            monkeypatch.chdir(tmp_path)
            assert main(["-q", "a.md"]) == 0
            assert capsys.readouterr().out == ""


        def test_folder_argument_checks_all_markdown_files(tmp_path, capsys, monkeypatch):
            docs = tmp_path / "docs"
            docs.mkdir()
            (docs / "a.md").write_text("[b](b.md)\\n", encoding="utf-8")
            (docs / "b.md").write_text("# B\\n", encoding="utf-8")
            (docs / "notes.txt").write_text("[x](nowhere.md)\\n", encoding="utf-8")
            monkeypatch.chdir(tmp_path)
            assert main(["docs"]) == 0
            assert "2 file(s)" in capsys.readouterr().out
        '''),
    "tests/test_scanner.py": src('''
        from pathlib import Path

        from mdlinks.scanner import Checker, collect_anchors, iter_links


        def write(root: Path, name: str, text: str) -> Path:
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return path


        def test_finds_inline_and_reference_links():
            text = "See [a](a.md) and [b](b.md#x).\\n\\n[ref]: c.md\\n"
            targets = [link.target for link in iter_links(Path("doc.md"), text)]
            assert targets == ["a.md", "b.md#x", "c.md"]


        def test_ignores_images_and_code_fences():
            text = "![logo](logo.png)\\n```\\n[not](a-link.md)\\n```\\n[real](real.md)\\n"
            links = list(iter_links(Path("doc.md"), text))
            assert [(link.line, link.target) for link in links] == [(5, "real.md")]


        def test_collect_anchors():
            text = "# Guide\\n\\n## Quick start\\n\\n```\\n# not a heading\\n```\\n"
            assert collect_anchors(text) == {"guide", "quick-start"}


        def test_repeated_headings_get_numbered_anchors():
            # github.com: the second "Examples" becomes #examples-1, the third #examples-2 (#41)
            text = "## Examples\\n\\ntext\\n\\n## Examples\\n\\n## Examples\\n"
            assert collect_anchors(text) == {"examples", "examples-1", "examples-2"}


        def test_missing_file_is_reported(tmp_path):
            doc = write(tmp_path, "doc.md", "[x](missing.md)\\n")
            problems = Checker(tmp_path).check_file(doc)
            assert [p.reason for p in problems] == ["file not found"]


        def test_missing_anchor_is_reported(tmp_path):
            write(tmp_path, "other.md", "# Present\\n")
            doc = write(tmp_path, "doc.md", "[ok](other.md#present) [bad](other.md#absent)\\n")
            problems = Checker(tmp_path).check_file(doc)
            assert [(p.link.target, p.reason) for p in problems] == [("other.md#absent", "no heading for #absent")]


        def test_same_file_anchor(tmp_path):
            doc = write(tmp_path, "doc.md", "# Top\\n\\n[up](#top)\\n")
            assert Checker(tmp_path).check_file(doc) == []


        def test_links_outside_root_are_reported(tmp_path):
            write(tmp_path, "README.md", "# Readme\\n")
            doc = write(tmp_path / "docs", "doc.md", "[readme](../README.md)\\n")
            problems = Checker(tmp_path / "docs").check_file(doc)
            assert [p.reason for p in problems] == ["points outside the checked folder"]


        def test_external_links_are_skipped(tmp_path):
            doc = write(tmp_path, "doc.md", "[site](https://example.org/x.md) [mail](mailto:a@b.c)\\n")
            assert Checker(tmp_path).check_file(doc) == []
        '''),
    "tests/test_slugs.py": src('''
        import pytest

        from mdlinks.slugs import heading_text, slugify


        @pytest.mark.parametrize(
            ("line", "expected"),
            [
                ("# Title", "Title"),
                ("### Deep heading ###", "Deep heading"),
                ("   ## Indented", "Indented"),
                ("#NoSpace", None),
                ("####### Seven", None),
                ("plain text", None),
            ],
        )
        def test_heading_text(line, expected):
            assert heading_text(line) == expected


        def test_lowercases_and_joins_words():
            assert slugify("Quick Start") == "quick-start"


        def test_drops_punctuation():
            assert slugify("What's new in 0.3?") == "whats-new-in-03"


        def test_strips_inline_code_markers():
            assert slugify("The `paths` argument") == "the-paths-argument"


        def test_uses_link_text_only():
            assert slugify("See [the guide](guide.md)") == "see-the-guide"


        def test_keeps_unicode_letters():
            assert slugify("Über Anker") == "über-anker"


        def test_keeps_consecutive_hyphens():
            # github.com renders "The `--root` option" as #the---root-option (#41)
            assert slugify("The `--root` option") == "the---root-option"
        '''),
}

REPORT_PY = src(r'''
    """Output formats for check results: text lines for people, JSON for CI."""

    from __future__ import annotations

    import json
    from collections.abc import Sequence

    from mdlinks.scanner import Problem

    FORMATS = ("text", "json")
    JSON_VERSION = 1


    def format_text(problems: Sequence[Problem]) -> str:
        """Return one ``file:line: target: reason`` line per problem ("" when none)."""
        return "".join(f"{p.link.source}:{p.link.line}: {p.link.target}: {p.reason}\n" for p in problems)


    def format_json(problems: Sequence[Problem], files_checked: int) -> str:
        """Return a JSON document: format version, number of files checked, the problems."""
        document = {
            "version": JSON_VERSION,
            "files_checked": files_checked,
            "problems": [
                {
                    "file": str(p.link.source),
                    "line": p.link.line,
                    "target": p.link.target,
                    "reason": p.reason,
                }
                for p in problems
            ],
        }
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    ''')

TEST_REPORT_PY = src('''
    import json
    from pathlib import Path

    from mdlinks.cli import main
    from mdlinks.report import format_json, format_text
    from mdlinks.scanner import Link, Problem

    PROBLEM = Problem(Link(Path("docs/guide.md"), 12, "install.md#setup"), "no heading for #setup")


    def test_text_format_one_line_per_problem():
        assert format_text([PROBLEM]) == "docs/guide.md:12: install.md#setup: no heading for #setup\\n"


    def test_text_format_empty():
        assert format_text([]) == ""


    def test_json_lists_problems():
        document = json.loads(format_json([PROBLEM], files_checked=3))
        assert document == {
            "version": 1,
            "files_checked": 3,
            "problems": [
                {"file": "docs/guide.md", "line": 12, "target": "install.md#setup", "reason": "no heading for #setup"},
            ],
        }


    def test_cli_json_output(tmp_path, capsys, monkeypatch):
        (tmp_path / "a.md").write_text("[gone](gone.md)\\n", encoding="utf-8")
        monkeypatch.chdir(tmp_path)
        assert main(["--format", "json", "a.md"]) == 1
        document = json.loads(capsys.readouterr().out)
        assert document["files_checked"] == 1
        assert document["problems"][0]["reason"] == "file not found"
    ''')

GIT_LOG_START = [
    ("5d0c7e2", "tests: reproduce anchor false positives from #41"),
    ("9f13b76", "Release 0.3.2"),
    ("a41c9e2", "scanner: check reference-style link definitions"),
    ("62e8d4a", "scanner: ignore links inside ~~~ fences"),
    ("0be5c19", "docs: explain the --root option"),
    ("c7a2f90", "cli: exit 2 on unknown options"),
]

# --------------------------------------------------------------------------------------------
# The system prompt and tools Pi sends (1.6.0 section names; our wording).
# --------------------------------------------------------------------------------------------

GLOBAL_AGENTS_MD = src("""
    # Everywhere

    - My machine: Debian, bash, Python from pyenv, Node 22. `rg` and `fd` are installed.
    - Never run `git push`, `git commit --amend`, `git rebase` or `git reset --hard` unless I ask.
    - Never edit files outside the working directory, and never touch `~/.ssh` or `~/.config`.
    - Before installing anything (pip, npm, apt), ask.
    - Long outputs: prefer `| tail -n 40` or a narrower command over dumping thousands of lines.
    - When you are unsure what I meant, ask one short question instead of guessing.
    - Write in plain English; no emojis in code, commits or docs.
    """)

PI_DOCS = "/usr/local/lib/node_modules/@earendil-works/pi-coding-agent"

SECTIONS: dict[str, str] = {
    "preamble": (
        "You are a coding agent working inside pi, a terminal coding harness. You help the user "
        "understand and change the code in their working directory: you read files, run commands, "
        "edit code and write new files."
    ),
    "tools": src("""
        <tools>
        - read: show the contents of a file
        - bash: run a shell command (ls, rg, find, git, test runners)
        - edit: replace exact text in a file; several separate replacements per call
        - write: create a file or replace all of its contents

        Extensions may add more tools.
        </tools>"""),
    "rules": src("""
        <rules>
        - Look around with bash (ls, rg, find); read files with read, not cat.
        - Prefer edit for small changes and batch the changes to one file in a single call.
        - Every edits[].oldText must match the file exactly and only once; keep it short.
        - Use write for new files or when rewriting a file completely.
        - Environment variables starting with PI_ describe the current model and session.
        - Run the project's tests after changing code, and say so when you could not.
        - Do not undo changes you did not make; ask when the working tree looks unexpected.
        - Answer briefly and name the files you touched.
        </rules>"""),
    "docs": src(f"""
        <docs>
        Documentation of pi itself (only when the user asks about pi, its SDK, extensions,
        themes, skills or TUI):
        - Overview: {PI_DOCS}/README.md
        - Topics: {PI_DOCS}/docs
          - extending pi: extensions.md, skills.md, prompt-templates.md, packages.md
          - look and feel: themes.md, tui.md, keybindings.md
          - models and providers: models.md, custom-provider.md, settings.md
          - sessions: session-format.md, compaction.md, tree.md
          - embedding pi: sdk.md, rpc.md
        - Examples: {PI_DOCS}/examples (extensions, custom tools, SDK use)
        Paths like docs/x.md in these pages are relative to the package folder above, not to the
        working directory. Read the relevant pages completely before changing anything about the
        harness.
        </docs>"""),
    "addendum": src("""
        <addendum>
        Notes from the user for every project:
        - I review diffs before anything is committed; never amend or rebase commits I have seen.
        - When a command fails, show the relevant lines of its output instead of retelling them.
        - Ask before adding a dependency, even a test-only one.
        - Keep answers short: what changed, where, and what you checked.
        </addendum>"""),
    "project_context": (
        "<project_context>\nInstructions that come with this project:\n\n"
        f'<project_instructions path="/home/dev/.pi/agent/AGENTS.md">\n{GLOBAL_AGENTS_MD}\n</project_instructions>\n\n'
        f'<project_instructions path="{CWD}/AGENTS.md">\n{PROJECT["AGENTS.md"]}\n'
        "</project_instructions>\n</project_context>"
    ),
    "skills": src("""
        <skills>
        Skills are folders of instructions. Read a skill's SKILL.md when the task matches it.
        - python-release: bump versions, update the changelog and prepare a release commit of a
          Python package (~/.pi/agent/skills/python-release/SKILL.md)
        - gh-actions-logs: read and summarise failing GitHub Actions runs, one job at a time
          (~/.pi/agent/skills/gh-actions-logs/SKILL.md)
        - pytest-triage: narrow a failing pytest run down to the smallest reproducing test
          (~/.pi/agent/skills/pytest-triage/SKILL.md)
        - markdown-style: house style for Markdown documentation (headings, tables, links)
          (~/.pi/agent/skills/markdown-style/SKILL.md)
        </skills>"""),
    "cwd": f"<cwd>\n{CWD}\n</cwd>",
}


def _tool(name: str, description: str, required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "required": required, "properties": properties},
        "constrainedSampling": {"type": "json_schema", "strict": "prefer"},
    }


TOOLS: list[dict[str, Any]] = [
    _tool(
        "read",
        "Read a file. Text files come back as text; images (png, jpg, gif, webp, bmp) are attached. "
        "Long text output stops after 2000 lines or 50KB, whichever comes first; continue with "
        "offset and limit until you have what you need.",
        ["path"],
        {
            "path": {"type": "string", "description": "File to read, relative to the working directory or absolute"},
            "offset": {"type": "number", "description": "First line to return (1-based)"},
            "limit": {"type": "number", "description": "Most lines to return"},
        },
    ),
    _tool(
        "bash",
        "Run a command with bash in the working directory and return stdout and stderr together. "
        "Only the last 2000 lines or 50KB are returned; the complete output is then saved to a "
        "temporary file. A timeout in seconds is optional.",
        ["command"],
        {
            "command": {"type": "string", "description": "The command line to run"},
            "timeout": {"type": "number", "description": "Seconds before the command is stopped (optional)"},
        },
    ),
    _tool(
        "edit",
        "Change one file by exact text replacement. Each edits[].oldText must occur exactly once in "
        "the original file and must not overlap another edit; merge neighbouring changes into one "
        "edit instead of sending overlapping ones, and leave out long unchanged stretches.",
        ["path", "edits"],
        {
            "path": {"type": "string", "description": "File to edit, relative to the working directory or absolute"},
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["oldText", "newText"],
                    "properties": {
                        "oldText": {
                            "type": "string",
                            "description": "Text to replace; unique in the original file, not overlapping other edits.",
                        },
                        "newText": {"type": "string", "description": "Text to put in its place."},
                    },
                },
                "description": "The replacements, each matched against the original file (not one after another).",
            },
        },
    ),
    _tool(
        "write",
        "Write a whole file: creates it (and missing parent folders) or replaces its contents.",
        ["path", "content"],
        {
            "path": {"type": "string", "description": "File to write, relative to the working directory or absolute"},
            "content": {"type": "string", "description": "The complete new contents"},
        },
    ),
]


def system_tokens() -> int:
    """Prompt tokens of the system prompt and tool definitions: ceil(chars/4) of the joined
    sections plus ceil(chars/4) of each tool's JSON."""
    prompt = "\n\n".join(SECTIONS.values())
    return _ceil4(utf16_len(prompt)) + sum(_ceil4(utf16_len(stringify(tool) or "")) for tool in TOOLS)


# --------------------------------------------------------------------------------------------
# Simulated tools: a virtual working tree with git, pytest and mdlinks outputs derived from it.
# --------------------------------------------------------------------------------------------


def _ceil4(chars: int) -> int:
    return math.ceil(chars / 4)


def line_of(text: str, needle: str) -> int:
    """1-based number of the first line of `text` containing `needle` (ValueError if absent)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise ValueError(f"{needle!r} not found")


def apply_edits(text: str, edits: list[dict[str, str]]) -> str:
    """Apply Pi edit-tool replacements (each oldText unique in the original text)."""
    spans = []
    for edit in edits:
        old = edit["oldText"]
        assert text.count(old) == 1, f"oldText not unique or missing: {old!r}"
        start = text.index(old)
        spans.append((start, start + len(old), edit["newText"]))
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _line_parts(old: str, new: str) -> list[tuple[str, list[str]]]:
    """Line diff as ("equal" | "removed" | "added", lines) parts, removals before additions."""
    a, b = old.split("\n"), new.split("\n")
    parts: list[tuple[str, list[str]]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            parts.append(("equal", a[i1:i2]))
        if tag in ("replace", "delete"):
            parts.append(("removed", a[i1:i2]))
        if tag in ("replace", "insert"):
            parts.append(("added", b[j1:j2]))
    return parts


def pi_edit_diff(old: str, new: str, context: int = 4) -> tuple[str, int]:
    """Pi's edit-tool display diff (`details.diff`) and `firstChangedLine` (1-based, new file)."""
    parts = _line_parts(old, new)
    width = len(str(max(len(old.split("\n")), len(new.split("\n")))))
    out: list[str] = []
    old_no = new_no = 1
    first: int | None = None
    last_was_change = False
    for index, (kind, lines) in enumerate(parts):
        if kind != "equal":
            first = new_no if first is None else first
            for line in lines:
                if kind == "added":
                    out.append(f"+{new_no:>{width}} {line}")
                    new_no += 1
                else:
                    out.append(f"-{old_no:>{width}} {line}")
                    old_no += 1
            last_was_change = True
            continue
        next_is_change = index + 1 < len(parts)
        if last_was_change or next_is_change:
            shown, skip_start, skip_end = lines, 0, 0
            if not last_was_change:
                skip_start = max(0, len(lines) - context)
                shown = lines[skip_start:]
            if not next_is_change and len(shown) > context:
                skip_end = len(shown) - context
                shown = shown[:context]
            if skip_start:
                out.append(f" {'':>{width}} ...")
                old_no += skip_start
                new_no += skip_start
            for line in shown:
                out.append(f" {old_no:>{width}} {line}")
                old_no += 1
                new_no += 1
            if skip_end:
                out.append(f" {'':>{width}} ...")
                old_no += skip_end
                new_no += skip_end
        else:
            old_no += len(lines)
            new_no += len(lines)
        last_was_change = False
    assert first is not None, "edit changed nothing"
    return "\n".join(out), first


def unified_patch(old: str, new: str, old_name: str, new_name: str, context: int, funcname: bool = False) -> str:
    """A unified diff; with `funcname`, hunk headers carry git's default function context."""
    old_lines = old.splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(old_lines, new.splitlines(keepends=True), old_name, new_name, n=context):
        if funcname and line.startswith("@@"):
            start = int(re.match(r"@@ -(\d+)", line).group(1))
            before = [s.rstrip("\n") for s in old_lines[: start - 1] if re.match(r"[A-Za-z_$]", s)]
            if before:
                line = line.rstrip("\n") + " " + before[-1][:80] + "\n"
        out.append(line)
    return "".join(out)


def git_blob(text: str) -> str:
    """Short git blob id of a file text (as `git diff` prints in its index line)."""
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:7]


class Repo:
    """The working tree (`files`), the last commit (`head`) and new files marked with
    `git add -N` (`intent`); nothing else is ever staged."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = dict(files)
        self.head = dict(files)
        self.intent: set[str] = set()
        self.log = list(GIT_LOG_START)

    def status(self) -> str:
        """`git status --short`."""
        out = []
        for path in sorted(self.files):
            if path in self.head and self.files[path] != self.head[path]:
                out.append(f" M {path}\n")
            elif path not in self.head:
                out.append(f" A {path}\n" if path in self.intent else f"?? {path}\n")
        return "".join(out)

    def diff(self) -> str:
        """`git diff`: tracked and intent-to-add files that differ from HEAD."""
        out = []
        for path in sorted(self.files):
            old, new = self.head.get(path), self.files[path]
            if old is None and path in self.intent:
                out.append(f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..{git_blob(new)}\n")
                out.append(unified_patch("", new, "/dev/null", f"b/{path}", 3))
            elif old is not None and old != new:
                out.append(f"diff --git a/{path} b/{path}\nindex {git_blob(old)}..{git_blob(new)} 100644\n")
                out.append(unified_patch(old, new, f"a/{path}", f"b/{path}", 3, funcname=True))
        return "".join(out)

    def add_intent(self, paths: list[str]) -> None:
        """`git add -N paths`."""
        self.intent.update(paths)

    def commit(self, paths: list[str] | None, message: str, rng: random.Random) -> None:
        """Commit `paths` (None: everything) and record a new short hash."""
        for path in paths if paths is not None else list(self.files):
            self.head[path] = self.files[path]
        self.intent -= set(self.head)
        self.log.insert(0, (f"{rng.getrandbits(28):07x}", message))

    def oneline(self, n: int) -> str:
        """`git log --oneline -n`."""
        return "".join(f"{sha} {msg}\n" for sha, msg in self.log[:n])


def collect_tests(files: dict[str, str]) -> list[str]:
    """Test ids pytest collects from `tests/test_*.py`, in order. A `@pytest.mark.parametrize`
    list (one literal tuple per line) expands to ids like `name[# Title-Title]`."""
    ids = []
    for path in sorted(p for p in files if re.fullmatch(r"tests/test_\w+\.py", p)):
        cases: list[str] = []
        for line in files[path].splitlines():
            if re.match(r"        \(", line):
                cases.append("-".join(str(v) for v in ast.literal_eval(line.strip().rstrip(","))))
            elif m := re.match(r"def (test_\w+)", line):
                ids.extend(f"{path}::{m[1]}[{case}]" for case in cases) if cases else ids.append(f"{path}::{m[1]}")
                cases = []
    return ids


def pytest_q(files: dict[str, str], failures: dict[str, tuple[str, str]] | None = None) -> tuple[str, int]:
    """Output and exit code of `python -m pytest -q` (with `-ra`) on the working tree.

    `failures` maps a test id to (traceback body, one-line reason for the summary).
    """
    failures = failures or {}
    ids = collect_tests(files)
    assert set(failures) <= set(ids), set(failures) - set(ids)
    dots = "".join("F" if test_id in failures else "." for test_id in ids)
    lines = [dots.ljust(74) + "[100%]"]
    if failures:
        lines.append(" FAILURES ".center(80, "="))
        for test_id in (t for t in ids if t in failures):
            lines.append(f" {test_id.split('::')[1]} ".center(80, "_"))
            lines.append("")
            lines.append(failures[test_id][0].rstrip("\n"))
        lines.append(" short test summary info ".center(80, "="))
        lines.extend(f"FAILED {t} - {failures[t][1]}" for t in ids if t in failures)
    seconds = f"{0.05 + 0.004 * len(ids):.2f}s"
    passed = len(ids) - len(failures)
    counts = (f"{len(failures)} failed, " if failures else "") + f"{passed} passed"
    lines.append(f"{counts} in {seconds}")
    return "\n".join(lines) + "\n", 1 if failures else 0


def pytest_v(files: dict[str, str]) -> tuple[str, int]:
    """Output of `python -m pytest -v` on the working tree (all tests pass)."""
    ids = collect_tests(files)
    lines = [
        " test session starts ".center(80, "="),
        f"platform linux -- Python 3.11.9, pytest-8.3.4, pluggy-1.5.0 -- {CWD}/.venv/bin/python",
        "cachedir: .pytest_cache",
        f"rootdir: {CWD}",
        "configfile: pyproject.toml",
        "testpaths: tests",
        f"collected {len(ids)} items",
        "",
    ]
    for done, test_id in enumerate(ids, start=1):
        left, progress = f"{test_id} PASSED", f"[{done * 100 // len(ids):3d}%]"
        lines.append(left.ljust(73) + progress if len(left) < 73 else f"{left} {progress}")
    lines += ["", f" {len(ids)} passed in {0.08 + 0.004 * len(ids):.2f}s ".center(80, "=")]
    return "\n".join(lines) + "\n", 0


# --------------------------------------------------------------------------------------------
# The dialogue as data.
# --------------------------------------------------------------------------------------------

Output = str | Callable[[Repo, random.Random], tuple[str, int]]


@dataclass
class Call:
    """One tool call. `bash` calls give their output (text, or a function of the repo returning
    (text, exit code)); read/edit/write results are derived from the repo."""

    tool: str
    args: dict[str, Any]
    output: Output = ""
    ms: int = 0  # tool run time; 0 picks a typical one


@dataclass
class Step:
    """One assistant response: optional thinking and text, then tool calls (none = final)."""

    thinking: str = ""
    text: str | Callable[[Repo], str] = ""  # a function when the text quotes a computed output
    calls: list[Call] = field(default_factory=list)


@dataclass
class Turn:
    """A user prompt typed `gap_s` seconds after the previous entry, and the agent's steps."""

    prompt: str
    gap_s: float
    steps: list[Step]


@dataclass
class Aborted:
    """A user prompt whose reply the user aborts (Esc) after `after_ms`, before any output."""

    prompt: str
    gap_s: float
    after_ms: int


@dataclass
class UserBash:
    """A `!command` the user runs; output is computed from the repo."""

    command: str
    gap_s: float
    output: Callable[[Repo], tuple[str, int]]


@dataclass
class Name:
    """`/name`: a session_info entry."""

    name: str
    gap_s: float


@dataclass
class Pin:
    """A `ds4:pin` label on the user message of the most recent turn."""

    label: str
    gap_s: float


@dataclass
class Compact:
    """`/compact`: keeps the most recent turn, summarises everything before it."""

    gap_s: float
    summary: str


def read(path: str) -> Call:
    """A read tool call."""
    return Call("read", {"path": path})


def edit(path: str, *pairs: tuple[str, str]) -> Call:
    """An edit tool call with (oldText, newText) pairs."""
    return Call("edit", {"path": path, "edits": [{"oldText": o, "newText": n} for o, n in pairs]})


def write(path: str, content: str) -> Call:
    """A write tool call."""
    return Call("write", {"path": path, "content": content})


def bash(command: str, output: Output, ms: int = 0) -> Call:
    """A bash tool call."""
    return Call("bash", {"command": command}, output, ms)


def run_pytest(failures: dict[str, tuple[str, str]] | None = None) -> Callable[[Repo, random.Random], tuple[str, int]]:
    """Bash output of `python -m pytest -q` on the repo at the time of the call."""
    return lambda repo, _rng: pytest_q(repo.files, failures)


def mdlinks_problems(repo: Repo, found: list[tuple[str, str, str]]) -> list[tuple[str, int, str, str]]:
    """(file, line, target, reason) for each expected (file, target, reason), in file/line order;
    lines are looked up in the working tree, repeated targets take successive occurrences."""
    result = []
    seen: dict[tuple[str, str], int] = {}
    for path, target, reason in found:
        needle = f"]({target})"
        nth = seen.get((path, target), 0)
        seen[(path, target)] = nth + 1
        lines = [n for n, line in enumerate(repo.files[path].splitlines(), start=1) if needle in line]
        result.append((path, lines[nth], target, reason))
    return sorted(result, key=lambda p: (p[0], p[1]))


def markdown_count(repo: Repo) -> int:
    """Markdown files in the repository."""
    return sum(1 for p in repo.files if p.endswith(".md"))


def docs_file_count(repo: Repo) -> int:
    """Markdown files under docs/."""
    return sum(1 for p in repo.files if p.startswith("docs/") and p.endswith(".md"))


ALL_DOC_PROBLEMS = [
    ("docs/guide.md", "#the---root-option", "no heading for #the---root-option"),
    ("docs/guide.md", "install.md#requirements", "no heading for #requirements"),
    ("docs/guide.md", "#the---root-option", "no heading for #the---root-option"),
    ("docs/guide.md", "#examples-1", "no heading for #examples-1"),
    ("docs/guide.md", "../CHANGELOG.md", "file not found"),
    ("docs/install.md", "guide.md#exit-status", "no heading for #exit-status"),
]
REAL_DOC_PROBLEMS = [ALL_DOC_PROBLEMS[i] for i in (1, 4, 5)]


def mdlinks_text(found: list[tuple[str, str, str]], paths: str = "docs") -> Callable[[Repo], tuple[str, int]]:
    """Output of `python -m mdlinks <paths>` (text format, stderr summary last)."""

    def run(repo: Repo) -> tuple[str, int]:
        count = docs_file_count(repo) + (1 if "README.md" in paths else 0)
        problems = mdlinks_problems(repo, found)
        if not problems:
            return f"No broken links in {count} file(s).\n", 0
        lines = "".join(f"{f}:{n}: {t}: {r}\n" for f, n, t, r in problems)
        return lines + f"{len(problems)} broken link(s) in {count} file(s).\n", 1

    return run


def mdlinks_json(found: list[tuple[str, str, str]]) -> Callable[[Repo, random.Random], tuple[str, int]]:
    """Output of `python -m mdlinks docs --format json`."""

    def run(repo: Repo, _rng: random.Random) -> tuple[str, int]:
        problems = mdlinks_problems(repo, found)
        items = ",\n".join(
            "    {\n"
            f'      "file": "{f}",\n      "line": {n},\n      "target": "{t}",\n      "reason": "{r}"\n'
            "    }"
            for f, n, t, r in problems
        )
        text = f'{{\n  "version": 1,\n  "files_checked": {docs_file_count(repo)},\n  "problems": [\n{items}\n  ]\n}}\n'
        return text, 1 if problems else 0

    return run


def git(action: Callable[[Repo, random.Random], str]) -> Callable[[Repo, random.Random], tuple[str, int]]:
    """A git command that succeeds with the given output."""
    return lambda repo, rng: (action(repo, rng), 0)


def commits_then_log(commits: list[tuple[list[str] | None, str]], log_n: int, tests_first: bool = False):
    """`[pytest -q &&] git add … && git commit -q -m … && … && git log --oneline -n`."""

    def run(repo: Repo, rng: random.Random) -> tuple[str, int]:
        out = pytest_q(repo.files)[0] if tests_first else ""
        for paths, message in commits:
            repo.commit(paths, message, rng)
        return out + repo.oneline(log_n), 0

    return run


def _traceback(path: str, source: list[str], error: list[str]) -> str:
    """A pytest failure body: the test source (last line marked `>`), `E` lines, the location."""
    assert_line = line_of(PROJECT[path], source[-1].strip())
    body = [f"    {line}" for line in source[:-1]] + [f">   {source[-1]}"]
    body += [f"E       {line}".rstrip() for line in error]
    return "\n".join(body) + f"\n\n{path}:{assert_line}: AssertionError\n"


FAILING_TESTS = {
    "tests/test_scanner.py::test_repeated_headings_get_numbered_anchors": (
        _traceback(
            "tests/test_scanner.py",
            [
                "def test_repeated_headings_get_numbered_anchors():",
                '    # github.com: the second "Examples" becomes #examples-1, the third #examples-2 (#41)',
                '    text = "## Examples\\n\\ntext\\n\\n## Examples\\n\\n## Examples\\n"',
                '    assert collect_anchors(text) == {"examples", "examples-1", "examples-2"}',
            ],
            [
                "AssertionError: assert {'examples'} == {'examples',...', 'examples-2'}",
                "",
                "  Extra items in the right set:",
                "  'examples-1'",
                "  'examples-2'",
                "  Use -v to get more diff",
            ],
        ),
        "AssertionError: assert {'examples'} == {'examples',...', 'examples-2'}",
    ),
    "tests/test_slugs.py::test_keeps_consecutive_hyphens": (
        _traceback(
            "tests/test_slugs.py",
            [
                "def test_keeps_consecutive_hyphens():",
                '    # github.com renders "The `--root` option" as #the---root-option (#41)',
                '    assert slugify("The `--root` option") == "the---root-option"',
            ],
            [
                "AssertionError: assert 'the-root-option' == 'the---root-option'",
                "",
                "  - the---root-option",
                "  ?     --",
                "  + the-root-option",
            ],
        ),
        "AssertionError: assert 'the-root-option' == 'the---root-option'",
    ),
}


def _grep_version_and_changes(repo: Repo, _rng: random.Random) -> tuple[str, int]:
    """`grep -n version pyproject.toml src/mdlinks/__init__.py && head -8 CHANGES.md`."""
    hits = [
        f"{path}:{n}:{line}\n"
        for path in ("pyproject.toml", "src/mdlinks/__init__.py")
        for n, line in enumerate(repo.files[path].splitlines(), start=1)
        if "version" in line
    ]
    head = "".join(repo.files["CHANGES.md"].splitlines(keepends=True)[:8])
    return "".join(hits) + head, 0


def _log_block(repo: Repo, n: int) -> str:
    return "```\n" + repo.oneline(n) + "```"


def _guide_line(target: str) -> int:
    return line_of(PROJECT["docs/guide.md"], f"]({target})")


COMPACTION_SUMMARY = src("""
    ## Goal
    Fix the false "no heading" reports in mdlinks (issue #41: anchors of headings with hyphen runs such as "The `--root` option", and GitHub's numbered anchors for repeated headings), add machine-readable `--format json` output for CI, and fix the real broken links in `docs/`.

    ## Constraints & Preferences
    - Standard library only, Python 3.11+; run `python -m pytest -q` before calling anything done
    - Anchors must match github.com; exit codes 0/1/2 are part of the interface
    - Paths in machine-readable output use forward slashes on every OS (AGENTS.md)
    - Commit messages `area: imperative summary`; the user pushes, not the agent
    - User's focus for this summary: the CLI and report format details

    ## Progress
    ### Done
    - [x] `slugify` in `src/mdlinks/slugs.py` keeps hyphen runs and no longer strips hyphens at the ends ("The `--root` option" -> `the---root-option`)
    - [x] `collect_anchors` in `src/mdlinks/scanner.py` numbers repeated headings like GitHub (`examples`, `examples-1`, ...)
    - [x] New `src/mdlinks/report.py`: `format_text(problems)` (unchanged `file:line: target: reason` lines) and `format_json(problems, files_checked)` -> `{"version": 1, "files_checked": N, "problems": [{"file", "line", "target", "reason"}]}`
    - [x] `src/mdlinks/cli.py`: `--format {text,json}`, default `text`; JSON mode writes only the document to stdout and keeps exit codes 0/1
    - [x] New `tests/test_report.py` (4 tests); full suite 29 passed
    - [x] Fixed the 3 real broken links: guide.md -> `install.md#system-requirements` and `../CHANGES.md`, install.md -> `guide.md#exit-codes`; `python -m mdlinks docs` is clean

    ### In Progress
    - [ ] User is reviewing the full `git diff` before committing

    ### Blocked
    - (none)

    ## Key Decisions
    - **Formatting in its own module (`report.py`)**: keeps `cli.py` as glue, as AGENTS.md asks, and is testable without argparse
    - **`version` field in the JSON**: lets CI scripts detect a change of shape
    - **Text output unchanged**: existing CI jobs grep it
    - **No special case for headings that literally produce `x-1`**: rare, would need a second pass; mentioned to the user

    ## Next Steps
    1. Commit in three commits (anchors, JSON output, docs) on branch `fix-anchors` once the user approves
    2. README does not mention `--format` yet
    3. Version is still 0.3.2 (pyproject.toml and `src/mdlinks/__init__.py`)

    ## Critical Context
    - `src/mdlinks/report.py` and `tests/test_report.py` are new, marked intent-to-add (`git add -N`), not staged
    - CI runs on ubuntu-latest and windows-latest with Python 3.11 and 3.13
    """).rstrip("\n")


SCRIPT: list[Any] = [
    Aborted("Run the test suite and tell me what's failing.", gap_s=0, after_ms=2140),
    Turn(
        "Sorry, hit enter too early. Start with a quick tour of the code so I know where things are, "
        "then run the tests. Priya pushed two failing tests yesterday that reproduce the anchor bugs "
        "from issue #41.",
        gap_s=19,
        steps=[
            Step(
                thinking="The user wants an orientation first, then a test run. The repository looks small: list "
                "the tracked files and the recent history, then read the modules under src/mdlinks. Priya's "
                "tests should be the newest commit.",
                calls=[
                    bash(
                        "git ls-files && git log --oneline -6",
                        git(lambda repo, _rng: "".join(f"{p}\n" for p in sorted(repo.files)) + repo.oneline(6)),
                    )
                ],
            ),
            Step(
                thinking="Three modules, cli.py, scanner.py and slugs.py, each with its own test file. The newest "
                "commit only touches tests. Read all three modules together.",
                text="A small package: three modules under `src/mdlinks/`, one test file each. Reading the modules:",
                calls=[read("src/mdlinks/cli.py"), read("src/mdlinks/scanner.py"), read("src/mdlinks/slugs.py")],
            ),
            Step(
                thinking="cli.py is thin glue: parse the arguments, run a Checker over markdown_files(), print the "
                "problems, exit 1 if there are any. scanner.py finds inline links and reference definitions "
                "outside code fences, resolves them relative to the source file, and checks #anchors against "
                "collect_anchors(), a set of slugify() results per target file.\n\nTwo things look wrong against "
                "GitHub's rules. slugify ends with re.sub(r\"-{2,}\", \"-\", text).strip(\"-\"), so it collapses "
                "hyphen runs that GitHub keeps. And collect_anchors never numbers repeated headings, so a link "
                "to #examples-1 can never resolve. Let me see which of these Priya's tests hit.",
                calls=[bash("python -m pytest -q", run_pytest(FAILING_TESTS), ms=870)],
            ),
            Step(
                text=src("""
                    Here's the layout:

                    - **`src/mdlinks/cli.py`**: argparse and output only. `main()` expands folders to `*.md` files (`markdown_files`), runs a `Checker` over them, prints `file:line: target: reason` per problem and a summary on stderr. Exit codes: 0 clean, 1 broken links, 2 bad arguments (argparse).
                    - **`src/mdlinks/scanner.py`**: the real work. `iter_links` finds inline links and reference definitions outside code fences (images are skipped); `Checker.check_link` resolves a target relative to its source file, rejects anything outside `--root`, and checks `#anchors` against `collect_anchors()` of the target document (cached per file).
                    - **`src/mdlinks/slugs.py`**: `heading_text` parses ATX headings, `slugify` turns heading text into GitHub's anchor id.
                    - **`tests/`**: one file per module. `docs/` is checked by mdlinks itself in CI.

                    Test run: **2 failed, 23 passed**. Both failures are Priya's new tests:

                    1. `test_keeps_consecutive_hyphens`: `slugify("The `--root` option")` returns `the-root-option`, GitHub renders `the---root-option`. The last line of `slugify` collapses hyphen runs and strips hyphens at the ends; GitHub does neither.
                    2. `test_repeated_headings_get_numbered_anchors`: `collect_anchors` returns a plain set of slugs, so repeated headings never get GitHub's `-1`, `-2` suffixes and links to `#examples-1` always fail.

                    Both are small fixes, one in `slugs.py` and one in `scanner.py`. Shall I go ahead?"""),
            ),
        ],
    ),
    Name("mdlinks: GitHub anchors and JSON output", gap_s=24),
    UserBash("python -m mdlinks docs", gap_s=31, output=mdlinks_text(ALL_DOC_PROBLEMS)),
    Turn(
        "That's our own docs. Three of those six are false positives: the `--root` anchors and `#examples-1` "
        "work fine on GitHub. Yes, fix both bugs so Priya's tests pass. Leave the three real broken links "
        "alone for now.",
        gap_s=52,
        steps=[
            Step(
                thinking="The output of the user's command shows exactly the two kinds of false positive: "
                "#the---root-option (twice) and #examples-1. Before editing, read both test files so the fix "
                "matches what they expect: whether suffixes start at -1, and whether anything else about "
                "hyphens is tested.",
                text="Reading the two test files first, so the fix matches them exactly.",
                calls=[read("tests/test_slugs.py"), read("tests/test_scanner.py")],
            ),
            Step(
                thinking="test_keeps_consecutive_hyphens wants the hyphens exactly as the space replacement leaves "
                "them, so slugify should simply return text.replace(\" \", \"-\"). GitHub does not strip hyphens "
                "at the ends either.\n\nFor repeated headings: count each base slug; the first occurrence stays "
                "plain, then -1, -2. GitHub also skips a suffix that a literal heading like \"Examples 1\" already "
                "took, but that needs a second pass and nothing tests it; mention it instead. The two edits are "
                "independent, do both at once.",
                calls=[
                    edit(
                        "src/mdlinks/slugs.py",
                        (
                            '    text = text.replace(" ", "-")\n    return re.sub(r"-{2,}", "-", text).strip("-")\n',
                            '    # GitHub keeps every hyphen: "The `--root` option" -> "the---root-option".\n'
                            '    return text.replace(" ", "-")\n',
                        ),
                    ),
                    edit(
                        "src/mdlinks/scanner.py",
                        (
                            "    anchors = set()\n    for _, line in _outside_fences(text):\n"
                            "        title = heading_text(line)\n        if title is not None:\n"
                            "            anchors.add(slugify(title))\n",
                            "    anchors = set()\n    seen: dict[str, int] = {}\n"
                            "    for _, line in _outside_fences(text):\n        title = heading_text(line)\n"
                            "        if title is None:\n            continue\n        slug = slugify(title)\n"
                            "        count = seen.get(slug, 0)\n        seen[slug] = count + 1\n"
                            "        # Repeated headings get -1, -2, ... as on github.com.\n"
                            '        anchors.add(slug if count == 0 else f"{slug}-{count}")\n',
                        ),
                    ),
                ],
            ),
            Step(calls=[bash("python -m pytest -q", run_pytest(), ms=820)]),
            Step(
                text=src("""
                    Both fixed: **25 passed**.

                    - `src/mdlinks/slugs.py`: `slugify` no longer collapses or strips hyphens. After dropping punctuation it only turns spaces into hyphens, as GitHub does.
                    - `src/mdlinks/scanner.py`: `collect_anchors` counts each slug and adds `-1`, `-2`, … for repeated headings.

                    One edge case I left alone: GitHub also skips a number when a heading literally named "Examples 1" already produced `examples-1`. That's rare and needs a second pass; say if you want it.

                    `mdlinks docs` should now report only the three real broken links."""),
            ),
        ],
    ),
    Turn(
        "Nice. Next: our CI wants machine-readable output. Add `--format json` (text stays the default), "
        "put the formatting in its own module, and add tests.",
        gap_s=96,
        steps=[
            Step(
                thinking="New module src/mdlinks/report.py with format_text and format_json; cli.py picks one from "
                "--format. CI scripts need a stable shape: a version number, how many files were checked, and "
                "one object per problem with file, line, target and reason. Exit codes stay the same in JSON "
                "mode. The summary line goes to stderr, so stdout holds nothing but the JSON document and stays "
                "parseable.\n\ncli.py needs three edits: the import, the new argument, and the output block.",
                text="I'll add `src/mdlinks/report.py` with both formats and keep `cli.py` as glue.",
                calls=[
                    write("src/mdlinks/report.py", REPORT_PY),
                    edit(
                        "src/mdlinks/cli.py",
                        (
                            "from mdlinks.scanner import Checker, markdown_files\n",
                            "from mdlinks.report import FORMATS, format_json, format_text\n"
                            "from mdlinks.scanner import Checker, markdown_files\n",
                        ),
                        (
                            '    parser.add_argument("-q", "--quiet"',
                            "    parser.add_argument(\n        \"--format\",\n        choices=FORMATS,\n"
                            '        default="text",\n        help="text lines (default) or one JSON document for CI",\n'
                            '    )\n    parser.add_argument("-q", "--quiet"',
                        ),
                        (
                            "    for problem in problems:\n        link = problem.link\n"
                            '        print(f"{link.source}:{link.line}: {link.target}: {problem.reason}")\n'
                            "    if problems:\n",
                            '    if args.format == "json":\n        sys.stdout.write(format_json(problems, len(files)))\n'
                            "        return 1 if problems else 0\n    sys.stdout.write(format_text(problems))\n"
                            "    if problems:\n",
                        ),
                    ),
                ],
            ),
            Step(
                thinking="Tests: the text line, empty text, the exact JSON shape, and the CLI end to end.",
                calls=[write("tests/test_report.py", TEST_REPORT_PY)],
            ),
            Step(calls=[bash("python -m pytest -q", run_pytest(), ms=910)]),
            Step(
                text=src("""
                    Done: **29 passed** (4 new).

                    - New `src/mdlinks/report.py`: `format_text(problems)` (the existing line format) and `format_json(problems, files_checked)`.
                    - `src/mdlinks/cli.py`: `--format {text,json}`, default `text`. In JSON mode stdout holds only the JSON document; exit codes stay 0/1.
                    - New `tests/test_report.py`: both formats plus an end-to-end `--format json` run.

                    The JSON shape:

                    ```json
                    {"version": 1, "files_checked": 3, "problems": [{"file": "docs/guide.md", "line": 12, "target": "install.md#setup", "reason": "no heading for #setup"}]}
                    ```

                    `version` gives CI scripts a way to notice if the shape ever changes."""),
            ),
        ],
    ),
    Turn(
        "Run it on docs/ with the JSON format so I can see the real output.",
        gap_s=71,
        steps=[
            Step(calls=[bash("python -m mdlinks docs --format json", mdlinks_json(REAL_DOC_PROBLEMS), ms=140)]),
            Step(
                text=src(f"""
                    Only the three real problems are left:

                    | file | line | link | problem |
                    | --- | --- | --- | --- |
                    | `docs/guide.md` | {_guide_line("install.md#requirements")} | `install.md#requirements` | the heading is "System requirements", so `#system-requirements` |
                    | `docs/guide.md` | {_guide_line("../CHANGELOG.md")} | `../CHANGELOG.md` | the file is called `CHANGES.md` |
                    | `docs/install.md` | {line_of(PROJECT["docs/install.md"], "](guide.md#exit-status)")} | `guide.md#exit-status` | the heading is "Exit codes", so `#exit-codes` |

                    The exit code is 1 as in text mode, which is why the tool reports the run as failed."""),
            ),
        ],
    ),
    Turn(
        "Those are real. Fix them in the docs.",
        gap_s=47,
        steps=[
            Step(
                thinking="Three link fixes: guide.md to install.md#system-requirements and ../CHANGES.md, "
                "install.md to guide.md#exit-codes. Read both files so the edits match exactly and to see "
                "whether the link texts need adjusting too.",
                calls=[read("docs/guide.md"), read("docs/install.md")],
            ),
            Step(
                thinking="In install.md the link text says \"exit status\" but the heading is \"Exit codes\"; change "
                "both so they agree.",
                calls=[
                    edit(
                        "docs/guide.md",
                        ("(install.md#requirements)", "(install.md#system-requirements)"),
                        ("[changelog](../CHANGELOG.md)", "[changelog](../CHANGES.md)"),
                    ),
                    edit("docs/install.md", ("[exit status](guide.md#exit-status)", "[exit codes](guide.md#exit-codes)")),
                ],
            ),
            Step(calls=[bash("python -m mdlinks docs", lambda repo, _rng: mdlinks_text([])(repo), ms=130)]),
            Step(
                text=src("""
                    Fixed; `mdlinks docs` is clean now (3 files):

                    - `docs/guide.md`: `install.md#requirements` → `install.md#system-requirements`, `../CHANGELOG.md` → `../CHANGES.md`
                    - `docs/install.md`: `guide.md#exit-status` → `guide.md#exit-codes`; the link text now says "exit codes" to match the heading"""),
            ),
        ],
    ),
    Turn(
        "Show me the complete diff before I commit, new files included. I want to read the slug change and "
        "the new option myself before any of it goes into history.",
        gap_s=84,
        steps=[
            Step(
                thinking="The two new files are untracked, so a plain git diff would leave them out. Mark them "
                "intent-to-add; that stages nothing, but git diff then shows them in full.",
                calls=[
                    bash(
                        "git add -N src/mdlinks/report.py tests/test_report.py && git status --short && git diff",
                        git(lambda repo, _rng: (repo.add_intent(["src/mdlinks/report.py", "tests/test_report.py"]), repo.status() + repo.diff())[1]),
                    )
                ],
            ),
            Step(
                text=src("""
                    The full diff: five changed files and two new ones (marked intent-to-add with `git add -N`, so they show up; nothing is staged):

                    - **`src/mdlinks/slugs.py`**: `slugify` keeps hyphen runs (#41, first half).
                    - **`src/mdlinks/scanner.py`**: `collect_anchors` numbers repeated headings (#41, second half).
                    - **`src/mdlinks/cli.py`**: the `--format {text,json}` option; output now goes through `report.py`.
                    - **`src/mdlinks/report.py`**, **`tests/test_report.py`**: the new formatting module and its 4 tests.
                    - **`docs/guide.md`**, **`docs/install.md`**: the three broken links.

                    Tests: 29 passed, and `mdlinks docs` is clean. I'd suggest three commits: the anchor fix, the JSON output, the docs links. Or a single commit, if you'd rather keep #41 and the JSON output together."""),
            ),
        ],
    ),
    Compact(gap_s=38, summary=COMPACTION_SUMMARY),
    Turn(
        "Yes, commit it as those three commits.",
        gap_s=64,
        steps=[
            Step(
                thinking="Three commits on fix-anchors. Anchors: slugs.py and scanner.py. JSON output: report.py, "
                "cli.py and tests/test_report.py (the new files must be added explicitly). Docs: guide.md and "
                "install.md. Messages in the area: summary style from AGENTS.md.",
                calls=[
                    bash(
                        "git add src/mdlinks/slugs.py src/mdlinks/scanner.py && "
                        'git commit -q -m "slugs: match GitHub anchors for hyphen runs and repeated headings" && '
                        "git add src/mdlinks/report.py src/mdlinks/cli.py tests/test_report.py && "
                        'git commit -q -m "cli: add --format json for CI" && '
                        "git add docs/guide.md docs/install.md && "
                        'git commit -q -m "docs: fix three broken links" && git status --short && git log --oneline -4',
                        commits_then_log(
                            [
                                (["src/mdlinks/slugs.py", "src/mdlinks/scanner.py"], "slugs: match GitHub anchors for hyphen runs and repeated headings"),
                                (["src/mdlinks/report.py", "src/mdlinks/cli.py", "tests/test_report.py"], "cli: add --format json for CI"),
                                (["docs/guide.md", "docs/install.md"], "docs: fix three broken links"),
                            ],
                            4,
                        ),
                        ms=160,
                    )
                ],
            ),
            Step(
                text=lambda repo: "Committed on `fix-anchors`; the working tree is clean:\n\n"
                + _log_block(repo, 4)
                + "\n\nNothing is pushed; AGENTS.md leaves that to you."
            ),
        ],
    ),
    Turn(
        src("""
            I pushed, and the Windows job failed. From the Actions log (test (windows-latest, 3.13)):

            ```
            Run python -m pytest -q
            ....F.F......................                                             [100%]
            =========================== short test summary info ============================
            FAILED tests/test_report.py::test_text_format_one_line_per_problem - AssertionError: assert 'docs\\\\guide.md:12: install.md#setup: no heading for #setup\\n' == 'docs/guide.md:12: install.md#setup: no heading for #setup\\n'
            FAILED tests/test_report.py::test_json_lists_problems - AssertionError: assert {'files_checked': 3, 'problems': [{'file': 'docs\\\\guide.md', 'line': 12, 'reason': 'no heading for #setup', 'target': 'install.md#setup'}], 'version': 1} == {'files_checked': 3, 'problems': [{'file': 'docs/guide.md', 'line': 12, 'reason': 'no heading for #setup', 'target': 'install.md#setup'}], 'version': 1}
            2 failed, 27 passed in 0.41s
            Error: Process completed with exit code 1.
            ```

            The Ubuntu jobs are green."""),
        gap_s=434,
        steps=[
            Step(
                thinking="Both failures are path separators: on Windows str(Path(\"docs/guide.md\")) is "
                "\"docs\\\\guide.md\". AGENTS.md says machine-readable output uses forward slashes on every OS, so "
                "format_json should write p.link.source.as_posix(). The text format is for people; native "
                "separators are right there, and the test should build its expectation from Path instead of "
                "hard-coding \"/\".\n\nThe summary describes report.py but I no longer have its text, so read it "
                "and the test file before editing, and cli.py to check that no other machine-readable output "
                "goes through str(path).",
                calls=[read("src/mdlinks/report.py"), read("tests/test_report.py"), read("src/mdlinks/cli.py")],
            ),
            Step(
                thinking="cli.py only passes problems through format_json/format_text, so report.py is the one "
                "place to fix.",
                text="JSON paths should follow the AGENTS.md rule (forward slashes everywhere); the text format "
                "can stay native, the test just has to expect that. I'll also add a test that catches this on "
                "Linux runners.",
                calls=[
                    edit("src/mdlinks/report.py", ('"file": str(p.link.source),', '"file": p.link.source.as_posix(),')),
                    edit(
                        "tests/test_report.py",
                        ("from pathlib import Path\n", "from pathlib import Path, PureWindowsPath\n"),
                        (
                            '    assert format_text([PROBLEM]) == "docs/guide.md:12: install.md#setup: no heading for #setup\\n"\n',
                            '    expected = f"{Path(\'docs/guide.md\')}:12: install.md#setup: no heading for #setup\\n"\n'
                            "    assert format_text([PROBLEM]) == expected\n",
                        ),
                        (
                            "def test_cli_json_output(",
                            "def test_json_paths_use_forward_slashes():\n"
                            '    problem = Problem(Link(PureWindowsPath("docs\\\\guide.md"), 3, "a.md"), "file not found")\n'
                            "    document = json.loads(format_json([problem], files_checked=1))\n"
                            '    assert document["problems"][0]["file"] == "docs/guide.md"\n\n\n'
                            "def test_cli_json_output(",
                        ),
                    ),
                ],
            ),
            Step(calls=[bash("python -m pytest -q", run_pytest(), ms=940)]),
            Step(
                text=src("""
                    Fixed locally: **30 passed**.

                    - `src/mdlinks/report.py`: JSON paths use `as_posix()`, so CI gets `docs/guide.md` on every OS. That's the AGENTS.md rule I missed.
                    - `tests/test_report.py`: the text-format test now expects the native separator, and the new `test_json_paths_use_forward_slashes` feeds a Windows path through `format_json`, so a Linux run catches this kind of regression too.

                    Not committed yet."""),
            ),
        ],
    ),
    Pin("ds4:pin Windows CI failure (path separators)", gap_s=22),
    Turn(
        "Add a short section about `--format json` to the README, with an example of the output.",
        gap_s=108,
        steps=[
            Step(
                thinking="Read the README, and the guide's Output section so the two describe the output the same way.",
                calls=[read("README.md"), read("docs/guide.md")],
            ),
            Step(
                thinking="Add a row to the options table and a section before Development. Use an example document "
                "with the exact shape format_json produces (indent 2), with the same sample problem as the guide.",
                calls=[
                    edit(
                        "README.md",
                        (
                            "| `-q`, `--quiet` |",
                            "| `--format FORMAT` | `text` (default) or `json` |\n| `-q`, `--quiet` |",
                        ),
                        (
                            "## Development\n",
                            src("""
                                ## JSON output

                                `--format json` prints one JSON document instead of text lines, for CI
                                scripts. The exit code is the same as in text mode.

                                ```json
                                {
                                  "version": 1,
                                  "files_checked": 3,
                                  "problems": [
                                    {
                                      "file": "docs/guide.md",
                                      "line": 14,
                                      "target": "install.md#setup",
                                      "reason": "no heading for #setup"
                                    }
                                  ]
                                }
                                ```

                                Paths always use forward slashes. `version` changes only when the shape does.

                                ## Development
                                """),
                        ),
                    )
                ],
            ),
            Step(
                calls=[
                    bash(
                        "python -m mdlinks README.md docs",
                        lambda repo, _rng: mdlinks_text([], "README.md docs")(repo),
                        ms=150,
                    )
                ]
            ),
            Step(
                text="Added to `README.md`: a `--format FORMAT` row in the options table and a **JSON output** "
                "section with an example document, the exit-code note and the forward-slash guarantee. "
                "`mdlinks README.md docs` is still clean (4 files)."
            ),
        ],
    ),
    Turn(
        "Good. Bump the version to 0.4.0, add a CHANGES.md entry, run the tests once more and commit. Keep the "
        "Windows fix as its own commit, separate from the release.",
        gap_s=77,
        steps=[
            Step(
                thinking="The version lives in pyproject.toml and src/mdlinks/__init__.py. Check both, and the top "
                "of CHANGES.md for the entry format.",
                calls=[
                    bash(
                        "grep -n version pyproject.toml src/mdlinks/__init__.py && head -8 CHANGES.md",
                        _grep_version_and_changes,
                    )
                ],
            ),
            Step(
                calls=[
                    edit("pyproject.toml", ('version = "0.3.2"', 'version = "0.4.0"')),
                    edit("src/mdlinks/__init__.py", ('__version__ = "0.3.2"', '__version__ = "0.4.0"')),
                    edit(
                        "CHANGES.md",
                        (
                            "# Changes\n\n",
                            src("""
                                # Changes

                                ## 0.4.0 (2026-03-12)

                                - Anchors match github.com for headings with hyphen runs (`--root`) and
                                  for repeated headings (`#examples-1`) (#41).
                                - New `--format json` for CI; paths in JSON always use forward slashes.
                                - Docs: three broken links fixed; README documents the JSON output.

                                """),
                        ),
                    ),
                ],
            ),
            Step(
                calls=[
                    bash(
                        "python -m pytest -q && git add src/mdlinks/report.py tests/test_report.py && "
                        'git commit -q -m "report: use forward slashes in JSON paths" && git add -A && '
                        'git commit -q -m "Release 0.4.0" && git log --oneline -6',
                        commits_then_log(
                            [
                                (["src/mdlinks/report.py", "tests/test_report.py"], "report: use forward slashes in JSON paths"),
                                (None, "Release 0.4.0"),
                            ],
                            6,
                            tests_first=True,
                        ),
                        ms=1080,
                    )
                ]
            ),
            Step(
                text=lambda repo: "Done: tests pass (30) and there are two new commits:\n\n"
                + _log_block(repo, 2)
                + "\n\n- `report: use forward slashes in JSON paths`: the Windows fix and its test.\n"
                "- `Release 0.4.0`: version 0.4.0 in `pyproject.toml` and `src/mdlinks/__init__.py`, the "
                "`CHANGES.md` entry, and the README section on `--format json`.\n\n"
                "`fix-anchors` is now five commits ahead of Priya's tests. Nothing is pushed; once you push, "
                "the Windows job should pass."
            ),
        ],
    ),
    Turn(
        "Before I push: run the suite verbosely so I can see every test name, and check every Markdown "
        "file in the repository with mdlinks, not just docs/.",
        gap_s=58,
        steps=[
            Step(
                calls=[
                    bash("python -m pytest -v", lambda repo, _rng: pytest_v(repo.files), ms=1020),
                    bash(
                        "python -m mdlinks $(git ls-files '*.md')",
                        lambda repo, _rng: (f"No broken links in {markdown_count(repo)} file(s).\n", 0),
                        ms=160,
                    ),
                ]
            ),
            Step(
                text=lambda repo: f"All {len(collect_tests(repo.files))} tests pass, including the two from #41 "
                "(`test_keeps_consecutive_hyphens`, `test_repeated_headings_get_numbered_anchors`) and the "
                "Windows regression test `test_json_paths_use_forward_slashes`. mdlinks finds no broken "
                f"links in any of the {markdown_count(repo)} Markdown files (README, "
                "AGENTS.md, CHANGES.md and docs/). Ready to push."
            ),
        ],
    ),
]


# --------------------------------------------------------------------------------------------
# Writing the entries.
# --------------------------------------------------------------------------------------------

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_VALID_CUT_ROLES = {"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"}


def iso(ms: int) -> str:
    """Unix ms → ISO-8601 UTC with milliseconds and `Z`, as Pi writes entry timestamps."""
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def tokens_of(message: dict[str, Any]) -> int:
    """Pi's `estimateTokens` (COMP): ceil(chars/4) of a message's text (user/toolResult text,
    assistant text + thinking + tool name + JSON arguments, bash command + output, summaries)."""
    role = message["role"]
    content = message.get("content")
    chars = 0
    if isinstance(content, str):
        chars = utf16_len(content)
    elif isinstance(content, list):
        for block in content:
            if block["type"] in ("text", "thinking"):
                chars += utf16_len(block[block["type"]])
            elif block["type"] == "toolCall":
                chars += utf16_len(block["name"]) + utf16_len(stringify(block["arguments"]) or "")
    if role == "bashExecution":
        chars = utf16_len(message["command"]) + utf16_len(message["output"])
    if role == "compactionSummary":
        chars = utf16_len(message["summary"])
    return _ceil4(chars)


def cost(usage: dict[str, int]) -> dict[str, Any]:
    """pi-ai's catalog cost: price per million / 1e6 × tokens per bucket, total = their sum (USD)."""
    parts = {k: PRICES[k] / 1_000_000 * usage[k] for k in ("input", "output", "cacheRead", "cacheWrite")}
    total = parts["input"] + parts["output"] + parts["cacheRead"] + parts["cacheWrite"]
    return {**parts, "total": total, "totalFromProvider": False}


class SessionWriter:
    """Plays `SCRIPT` and collects the JSONL lines. All randomness comes from `rng`."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.repo = Repo(PROJECT)
        self.entries: list[dict[str, Any]] = []
        self.now = START_MS
        self.system = system_tokens()
        self.context: list[dict[str, Any]] = []  # messages the model sees (aborted replies skipped)
        self.cached_prefix = 0  # prompt tokens in the Anthropic prompt cache
        self.last_request_ms: int | None = None
        self.last_user_id: str | None = None
        self.last_assistant: dict[str, Any] | None = None

    # --- small helpers -----------------------------------------------------------------------

    def _rand(self, n: int) -> str:
        return "".join(self.rng.choice(_BASE62) for _ in range(n))

    def _new_id(self) -> str:
        taken = {e.get("id") for e in self.entries}
        while (candidate := f"{self.rng.getrandbits(32):08x}") in taken:
            pass
        return candidate

    def _signature(self, thinking: str) -> str:
        size = 3 * ((180 + len(thinking) // 4) // 3) + 1  # ends in "==", like Anthropic's
        return base64.b64encode(bytes(self.rng.getrandbits(8) for _ in range(size))).decode()

    def append(self, kind: str, ts: int, **fields: Any) -> dict[str, Any]:
        """Append an entry that follows the previous one (one linear branch)."""
        parent = self.entries[-1]["id"] if len(self.entries) > 1 else None
        entry = {"type": kind, "id": self._new_id(), "parentId": parent, "timestamp": iso(ts), **fields}
        self.entries.append(entry)
        return entry

    def _prompt_tokens(self) -> int:
        return self.system + sum(tokens_of(m) for m in self.context)

    # --- script events -----------------------------------------------------------------------

    def start(self) -> None:
        """Header, model and thinking level, and (with the first prompt) the system message."""
        session_id = self._uuid7(self.now)
        self.entries.append({"type": "session", "version": 3, "id": session_id, "timestamp": iso(self.now), "cwd": CWD})
        self.append("model_change", self.now + 7, provider=PROVIDER, modelId=MODEL)
        self.append("thinking_level_change", self.now + 7, thinkingLevel=THINKING_LEVEL)

    def _uuid7(self, ms: int) -> str:
        value = (ms << 80) | (0x7 << 76) | (self.rng.getrandbits(12) << 64) | (0b10 << 62) | self.rng.getrandbits(62)
        h = f"{value:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def user(self, prompt: str, gap_s: float) -> None:
        """A user message (the first one also writes the buffered system message)."""
        first = not any(e["type"] == "message" for e in self.entries)
        if first:
            self.now += 11
            self.append(
                "message",
                self.now + 2,
                message={
                    "role": "system",
                    "content": "",
                    "sections": SECTIONS,
                    "timestamp": self.now + 1,
                    "toolsAdded": TOOLS,
                },
            )
        else:
            self.now += round(gap_s * 1000) + self.rng.randint(0, 999)
        message = {"role": "user", "content": [{"type": "text", "text": prompt}], "timestamp": self.now}
        self.last_user_id = self.append("message", self.now + (2 if first else 0), message=message)["id"]
        self.context.append(message)
        self.now += 2 if first else 0

    def aborted(self, event: Aborted) -> None:
        """A prompt whose reply the user stopped before any output: empty content, zero usage."""
        self.user(event.prompt, event.gap_s)
        start = self.now + 1
        zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
        message = {
            "role": "assistant",
            "content": [],
            "api": API,
            "provider": PROVIDER,
            "model": MODEL,
            "usage": {**zero, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "aborted",
            "timestamp": start,
            "errorMessage": "Request was aborted.",
            "durationMs": event.after_ms,
            "thinkingLevel": THINKING_LEVEL,
        }
        self.now = start + event.after_ms
        self.append("message", self.now, message=message)

    def turn(self, event: Turn) -> None:
        """A user prompt and the agent's steps; the last step must be a final answer."""
        assert event.steps and not event.steps[-1].calls
        self.user(event.prompt, event.gap_s)
        for step in event.steps:
            self.respond(step)

    def respond(self, step: Step) -> None:
        """One assistant response and the results of its tool calls."""
        content: list[dict[str, Any]] = []
        if step.thinking:
            signature = self._signature(step.thinking)
            content.append({"type": "thinking", "thinking": step.thinking, "thinkingSignature": signature})
        text = step.text(self.repo) if callable(step.text) else step.text
        if text:
            content.append({"type": "text", "text": text})
        calls = [(f"toolu_01{self._rand(22)}", call) for call in step.calls]
        content += [{"type": "toolCall", "id": cid, "name": c.tool, "arguments": c.args} for cid, c in calls]

        start = self.now + 1
        prompt = self._prompt_tokens()
        warm = self.last_request_ms is not None and start - self.last_request_ms <= CACHE_TTL_MS
        usage = {"input": self.rng.randint(1, 10), "output": 0, "cacheRead": self.cached_prefix if warm else 0}
        usage["cacheWrite"] = prompt - usage["input"] - usage["cacheRead"]
        message: dict[str, Any] = {"role": "assistant", "content": content}
        usage["output"] = tokens_of(message) + self.rng.randint(2, 14)
        usage["totalTokens"] = prompt + usage["output"]
        duration = 600 + usage["cacheWrite"] // 25 + usage["output"] * 16 + self.rng.randint(0, 450)
        message.update(
            api=API,
            provider=PROVIDER,
            model=MODEL,
            usage={**usage, "cost": cost(usage), "cacheWrite1h": 0},
            stopReason="toolUse" if calls else "stop",
            timestamp=start,
            responseId=f"msg_01{self._rand(22)}",
            rawStopReason="tool_use" if calls else "end_turn",
            durationMs=duration,
            thinkingLevel=THINKING_LEVEL,
        )
        self.now = start + duration
        self.append("message", self.now, message=message)
        self.context.append(message)
        self.cached_prefix, self.last_request_ms = prompt, start
        self.last_assistant = message
        if calls:
            results = [self.run_tool(cid, call) for cid, call in calls]
            self.now += max(r["durationMs"] for r in results) + self.rng.randint(1, 4)
            for result in results:
                result["timestamp"] = self.now
                self.append("message", self.now, message=result)
                self.context.append(result)

    def run_tool(self, call_id: str, call: Call) -> dict[str, Any]:
        """Run one tool call against the repo; returns the toolResult message (no timestamp yet)."""
        files, args = self.repo.files, call.args
        details = None
        is_error = False
        if call.tool == "read":
            text, ms = files[args["path"]], self.rng.randint(2, 14)
        elif call.tool == "write":
            files[args["path"]] = args["content"]
            text, ms = f"Successfully wrote to {args['path']}", self.rng.randint(2, 9)
        elif call.tool == "edit":
            old = files[args["path"]]
            new = files[args["path"]] = apply_edits(old, args["edits"])
            diff, first = pi_edit_diff(old, new)
            patch = unified_patch(old, new, args["path"], args["path"], 4)
            details = {"diff": diff, "patch": patch, "firstChangedLine": first}
            text, ms = f"Successfully replaced {len(args['edits'])} block(s) in {args['path']}.", self.rng.randint(3, 9)
        else:
            output, code = (call.output, 0) if isinstance(call.output, str) else call.output(self.repo, self.rng)
            text = output or "(no output)"
            if code:
                text, is_error = f"{output}\n\nCommand exited with code {code}", True
            ms = call.ms or self.rng.randint(12, 60)
        result: dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": call.tool,
            "content": [{"type": "text", "text": text}],
        }
        if details is not None:
            result["details"] = details
        result.update(isError=is_error, durationMs=ms)
        return result

    def user_bash(self, event: UserBash) -> None:
        """A `!command` run by the user: a bashExecution message (in context)."""
        self.now += round(event.gap_s * 1000) + self.rng.randint(0, 999)
        output, code = event.output(self.repo)
        ms = self.rng.randint(90, 180)
        message = {
            "role": "bashExecution",
            "command": event.command,
            "output": output,
            "exitCode": code,
            "cancelled": False,
            "truncated": False,
            "timestamp": self.now + ms,
        }
        self.now += ms
        self.append("message", self.now, message=message)
        self.context.append(message)

    def name(self, event: Name) -> None:
        """`/name`: a session_info entry."""
        self.now += round(event.gap_s * 1000) + self.rng.randint(0, 999)
        self.append("session_info", self.now, name=event.name)

    def pin(self, event: Pin) -> None:
        """A `ds4:pin` label on the latest user message."""
        self.now += round(event.gap_s * 1000) + self.rng.randint(0, 999)
        self.append("label", self.now, targetId=self.last_user_id, label=event.label)

    def compact(self, event: Compact) -> None:
        """`/compact`: summarise everything before the latest turn (Pi session format §9)."""
        kept_id = self.last_user_id
        assert self._pi_cut_point() == kept_id, "adjust KEEP_RECENT_TOKENS: Pi would cut elsewhere"
        kept_index = next(i for i, e in enumerate(self.entries) if e.get("id") == kept_id)
        summarised = [e["message"] for e in self.entries[:kept_index] if e["type"] == "message"]
        read_files, modified = set(), set()
        for message in summarised:
            for block in message["content"] if message["role"] == "assistant" else []:
                if block["type"] == "toolCall" and block["name"] == "read":
                    read_files.add(block["arguments"]["path"])
                elif block["type"] == "toolCall" and block["name"] in ("edit", "write"):
                    modified.add(block["arguments"]["path"])
        read_only = sorted(read_files - modified)
        summary = (
            f"{event.summary}\n\n<read-files>\n" + "\n".join(read_only) + "\n</read-files>\n\n<modified-files>\n"
            + "\n".join(sorted(modified)) + "\n</modified-files>"
        )
        self.now += round(event.gap_s * 1000) + self.rng.randint(0, 999)
        usage = {
            "input": 520 + _ceil4(sum(len(self._serialise(m)) for m in summarised)),
            "output": _ceil4(len(summary)) + self.rng.randint(5, 30),
            "cacheRead": 0,
            "cacheWrite": 0,
        }
        usage["totalTokens"] = usage["input"] + usage["output"]
        self.now += 2500 + usage["output"] * 16 + self.rng.randint(0, 900)
        assert self.last_assistant is not None
        system_message = {
            "role": "system",
            "content": "",
            "sections": SECTIONS,
            "toolsAdded": TOOLS,
            "timestamp": self.now,
        }
        self.append(
            "compaction",
            self.now,
            summary=summary,
            firstKeptEntryId=kept_id,
            tokensBefore=self.last_assistant["usage"]["totalTokens"],
            details={"readFiles": read_only, "modifiedFiles": sorted(modified)},
            usage={**usage, "cost": cost(usage), "cacheWrite1h": 0},
            fromHook=False,
            systemMessage=system_message,
        )
        kept = [e["message"] for e in self.entries[kept_index:] if e["type"] == "message"]
        self.context = [{"role": "compactionSummary", "summary": summary}, *kept]
        self.cached_prefix = self.system  # only the system prompt and tools are still cached

    @staticmethod
    def _serialise(message: dict[str, Any]) -> str:
        """The text Pi's summariser sees for one message (thinking left out, results cut to 2000)."""
        role = message["role"]
        if role == "bashExecution":
            return f"[User ran]: {message['command']}\n{message['output']}"
        speaker = {"user": "User", "assistant": "Assistant"}.get(role, "Tool result")
        parts = []
        for block in message["content"]:
            if block["type"] == "text":
                text = block["text"][:2000] if role == "toolResult" else block["text"]
                parts.append(f"[{speaker}]: {text}")
            elif block["type"] == "toolCall":
                parts.append(f"[Assistant tool calls]: {block['name']}({stringify(block['arguments'])})")
        return "\n\n".join(parts)

    def _pi_cut_point(self) -> str:
        """The entry id Pi's `findCutPoint` keeps from, walking back `KEEP_RECENT_TOKENS`."""
        entries = self.entries[1:]
        cut_points = [
            i for i, e in enumerate(entries) if e["type"] == "message" and e["message"]["role"] in _VALID_CUT_ROLES
        ]
        cut = cut_points[0]
        total = 0
        for i in range(len(entries) - 1, -1, -1):
            if entries[i]["type"] != "message":
                continue
            total += tokens_of(entries[i]["message"])
            if total >= KEEP_RECENT_TOKENS:
                cut = next(c for c in cut_points if c >= i)
                break
        while cut > 0 and entries[cut - 1]["type"] not in ("message", "compaction"):
            cut -= 1
        return entries[cut]["id"]

    def play(self, script: list[Any]) -> str:
        """Run the whole script; returns the JSONL text."""
        self.start()
        handlers: dict[type, Callable[[Any], None]] = {
            Aborted: self.aborted,
            Turn: self.turn,
            UserBash: self.user_bash,
            Name: self.name,
            Pin: self.pin,
            Compact: self.compact,
        }
        for event in script:
            handlers[type(event)](event)
        return "".join(f"{stringify(entry)}\n" for entry in self.entries)


def build_session() -> str:
    """The demo session's JSONL text (deterministic)."""
    return SessionWriter(random.Random(SEED)).play(SCRIPT)


def main(argv: list[str] | None = None) -> int:
    """Write the demo session to `-o PATH` (default `ds4tui/data/demo-session.jsonl`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=OUT, help="where to write the JSONL file")
    args = parser.parse_args(argv)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(build_session(), encoding="utf-8", newline="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
