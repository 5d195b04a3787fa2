"""DS4 configuration: file precedence, trust, model-override order, invalid values as warnings,
and the committed JSON schema."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ds4core.budgets import ModelDescriptor, resolve_model_awareness
from ds4core.config import Ds4Config, apply_source, default_config_json
from ds4sessions.agents.pi.discovery import agent_dir
from ds4sessions.derive.ds4config import load_ds4_config, project_trusted

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return tmp_path / "proj"


def test_defaults_without_files(project: Path) -> None:
    loaded = load_ds4_config(project)
    assert loaded.loaded_files == ()
    assert loaded.warnings == ()
    assert loaded.context.recent_tail_tokens == 64000
    assert loaded.context.max_pinned_tokens == 16000
    assert loaded.awareness.calibration_window == 24
    assert loaded.global_path == agent_dir() / "ds4-context.json"
    assert loaded.project_trusted is True


def test_project_file_overrides_global_field_by_field(project: Path) -> None:
    g = _write(agent_dir() / "ds4-context.json", {"context": {"recentTailTokens": 30000, "maxSummaryTokens": 5000}})
    p = _write(project / ".pi" / "ds4-context.json", {"context": {"recentTailTokens": 20000}})
    loaded = load_ds4_config(project)
    assert loaded.loaded_files == (g, p)
    assert loaded.context.recent_tail_tokens == 20000  # project wins
    assert loaded.context.max_summary_tokens == 5000  # global kept
    assert loaded.warnings == ()


def test_untrusted_project_is_skipped_with_a_warning(project: Path) -> None:
    _write(project / ".pi" / "ds4-context.json", {"context": {"recentTailTokens": 20000}})
    _write(project / ".pi" / "settings.json", {})  # a trust-requiring resource
    assert project_trusted(project) is False
    loaded = load_ds4_config(project)
    assert loaded.project_trusted is False
    assert loaded.context.recent_tail_tokens == 64000
    assert loaded.warnings == (
        f"{project / '.pi' / 'ds4-context.json'}: project configuration skipped because the project is not trusted",
    )


def test_trust_json_decision_of_an_ancestor_and_default_trust(project: Path) -> None:
    _write(project / ".pi" / "extensions" / "x.ts", "")
    assert project_trusted(project) is False
    _write(agent_dir() / "trust.json", {str(project.parent.resolve()): True})
    assert project_trusted(project) is True
    _write(agent_dir() / "trust.json", {str(project.resolve()): False, str(project.parent.resolve()): True})
    assert project_trusted(project) is False  # the nearest decision wins
    _write(agent_dir() / "trust.json", {})
    _write(agent_dir() / "settings.json", {"defaultProjectTrust": "always"})
    assert project_trusted(project) is True


def test_explicit_file_replaces_discovered_ones(project: Path, tmp_path: Path) -> None:
    _write(agent_dir() / "ds4-context.json", {"context": {"maxSummaryTokens": 5000}})
    explicit = _write(tmp_path / "mine.json", {"context": {"recentTailTokens": 1000}})
    loaded = load_ds4_config(project, config_file=explicit)
    assert loaded.loaded_files == (explicit,)
    assert loaded.context.recent_tail_tokens == 1000
    assert loaded.context.max_summary_tokens == 12000
    missing = load_ds4_config(project, config_file=tmp_path / "nope.json")
    assert missing.warnings == (f"{tmp_path / 'nope.json'}: configuration file not found; DS4 defaults used",)


def test_unknown_and_wrong_typed_values_are_ignored_with_warnings(project: Path) -> None:
    g = _write(
        agent_dir() / "ds4-context.json",
        {
            "context": {"recentTailTokens": 30000, "bogus": 1, "maxPinnedTokens": "lots", "cacheAware": 3},
            "retrieval": {"maxResults": 4},
            "whatever": True,
        },
    )
    loaded = load_ds4_config(project)
    assert loaded.loaded_files == (g,)
    assert loaded.context.recent_tail_tokens == 30000
    assert loaded.context.max_pinned_tokens == 16000
    assert loaded.warnings == (
        f"{g}: Unknown configuration key ignored: context.bogus",
        f"{g}: Invalid configuration value ignored: context.maxPinnedTokens has the wrong type",
        f"{g}: Invalid configuration value ignored: context.cacheAware must be an object",
        f"{g}: Unknown configuration key ignored: whatever",
    )
    assert loaded.config.retrieval == {"maxResults": 4}


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ({"context": {"targetFillRatio": 0.95}}, "context ratios must satisfy targetFillRatio <= softLimitRatio <= hardLimitRatio"),
        ({"context": {"hardLimitRatio": 1.5}}, "context.hardLimitRatio must be greater than 0 and at most 1"),
        ({"context": {"recentTailTokens": -1}}, "context.recentTailTokens must be a non-negative integer"),
        ({"context": {"mode": "wild"}}, "Input should be 'observer' or 'managed'"),
        ({"modelAwareness": {"calibrationWindow": 2}}, "modelAwareness.calibrationWindow must be an integer between 3 and 200"),
        ({"modelAwareness": {"overrides": {"*/x": {}}}}, "modelAwareness override */x must be provider/model, provider/*, or *"),
        ({"modelAwareness": {"overrides": {"a/b": {"contextWindow": 1000, "maxOutputTokens": 2000}}}}, "maxOutputTokens must not exceed contextWindow"),
    ],
)
def test_invalid_source_is_ignored_whole(project: Path, source: dict, reason: str) -> None:
    g = _write(agent_dir() / "ds4-context.json", {"context": {"maxSummaryTokens": 5000}, **source})
    loaded = load_ds4_config(project)
    assert loaded.loaded_files == ()
    assert loaded.context.max_summary_tokens == 12000  # the whole file was ignored
    assert len(loaded.warnings) == 1
    assert loaded.warnings[0].startswith(f"{g}: configuration ignored: ")
    assert loaded.warnings[0].endswith(reason)


def test_unparsable_file_is_a_warning(project: Path) -> None:
    g = _write(agent_dir() / "ds4-context.json", "{not json")
    loaded = load_ds4_config(project)
    assert loaded.loaded_files == ()
    assert len(loaded.warnings) == 1 and loaded.warnings[0].startswith(f"{g}: configuration ignored: ")
    arr = _write(agent_dir() / "ds4-context.json", "[1]")
    assert load_ds4_config(project).warnings == (f"{arr}: configuration ignored: top-level JSON value must be an object",)


def test_override_order_star_then_provider_then_model(project: Path) -> None:
    _write(
        agent_dir() / "ds4-context.json",
        {
            "modelAwareness": {
                "overrides": {
                    "anthropic/claude-x": {"maxRetrievedHistoryTokens": 3000},
                    "*": {"recentTailTokens": 9000, "maxRetrievedHistoryTokens": 1000, "maxProjectTokens": 500},
                    "anthropic/*": {"recentTailTokens": 7000, "maxRetrievedHistoryTokens": 2000},
                }
            }
        },
    )
    # The project's map merges by key: it replaces the "*" entry only.
    _write(project / ".pi" / "ds4-context.json", {"modelAwareness": {"overrides": {"*": {"maxProjectTokens": 800}}}})
    loaded = load_ds4_config(project)
    assert list(loaded.awareness.overrides) == ["anthropic/claude-x", "*", "anthropic/*"]
    model = ModelDescriptor("anthropic", "claude-x", 200_000, 32_000)
    resolved = resolve_model_awareness(model, loaded.context, loaded.awareness)
    assert resolved.override_keys == ("*", "anthropic/*", "anthropic/claude-x")
    assert resolved.limits.recent_tail_tokens == 7000  # provider/* over *
    assert resolved.limits.max_retrieved_history_tokens == 3000  # provider/model over both
    assert resolved.limits.max_project_tokens == 800  # the project's "*" entry
    other = resolve_model_awareness(ModelDescriptor("openai", "gpt", 200_000, 32_000), loaded.context, loaded.awareness)
    assert other.override_keys == ("*",)
    assert other.limits.recent_tail_tokens == 32000  # "*" in the project has no tail override


def test_merge_keeps_defaults_round_trip() -> None:
    config, warnings, applied = apply_source(Ds4Config(), default_config_json(), "d.json")
    assert applied and warnings == []
    assert config == Ds4Config()


def test_committed_schema_matches_the_models() -> None:
    spec = importlib.util.spec_from_file_location("export_config_schema", ROOT / "scripts" / "export_config_schema.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = (ROOT / "docs" / "ds4-config.schema.json").read_text(encoding="utf-8")
    assert committed == module.render()
    schema = json.loads(committed)
    assert schema["properties"]["context"]["$ref"] == "#/$defs/ContextSection"
    assert "recentTailTokens" in schema["$defs"]["ContextSection"]["properties"]


def test_ds4_is_active_only_with_its_config_or_its_package(tmp_path: Path) -> None:
    import json as _json

    from ds4sessions.derive.ds4config import ds4_active, load_ds4_config

    agent = tmp_path / "agent"
    agent.mkdir()
    project = tmp_path / "proj"
    project.mkdir()
    assert not ds4_active(load_ds4_config(project, agent=agent), project, agent)
    (agent / "settings.json").write_text(_json.dumps({"packages": ["npm:some-other-thing"], "defaultProvider": "anthropic"}))
    assert not ds4_active(load_ds4_config(project, agent=agent), project, agent)
    (agent / "settings.json").write_text(_json.dumps({"packages": ["git:github.com/Alucard24/ds4-context-engine"]}))
    assert ds4_active(None, project, agent)
    (agent / "settings.json").write_text("{not json")
    assert not ds4_active(None, project, agent)
    (agent / "ds4-context.json").write_text(_json.dumps({"context": {}}))
    assert ds4_active(load_ds4_config(project, agent=agent), project, agent)
    (agent / "ds4-context.json").unlink()
    (project / ".pi" / "extensions" / "ds4-context-engine").mkdir(parents=True)
    assert ds4_active(None, project, agent)
