"""`DS4TUI_CACHE_RETENTION`, the one prompt-cache retention setting, and its deprecated Codex name."""

from __future__ import annotations

from ds4sessions.agents.codex.view import configured_retention
from ds4sessions.retention import parse_retention, retention_from_env


def test_the_setting_names_agents_and_seconds() -> None:
    assert parse_retention("codex=300, gemini = 600.5,bad,pi=-1,x=,=5,y=1e999") == {"codex": 300, "gemini": 600}
    assert retention_from_env({"DS4TUI_CACHE_RETENTION": "codex=300"}).seconds == {"codex": 300}
    assert retention_from_env({}).seconds == {} and retention_from_env({}).notes == ()


def test_the_old_codex_name_still_works_with_a_note() -> None:
    old = retention_from_env({"DS4TUI_CODEX_CACHE_RETENTION": "300"})
    assert old.get("codex") == 300
    assert old.notes == ("DS4TUI_CODEX_CACHE_RETENTION is deprecated: use DS4TUI_CACHE_RETENTION=codex=300",)
    both = retention_from_env({"DS4TUI_CACHE_RETENTION": "codex=600", "DS4TUI_CODEX_CACHE_RETENTION": "300"})
    assert both.get("codex") == 600 and "ignored" in both.notes[0]
    bad = retention_from_env({"DS4TUI_CODEX_CACHE_RETENTION": "soon"})
    assert bad.get("codex") is None and "not a number of seconds" in bad.notes[0]


def test_the_codex_view_reads_the_same_setting(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("DS4TUI_CODEX_CACHE_RETENTION", raising=False)
    monkeypatch.setenv("DS4TUI_CACHE_RETENTION", "codex=420")
    assert configured_retention() == 420.0
    monkeypatch.setenv("DS4TUI_CACHE_RETENTION", "pi=420")
    assert configured_retention() is None
    monkeypatch.setenv("DS4TUI_CODEX_CACHE_RETENTION", "90")
    assert configured_retention() == 90.0
