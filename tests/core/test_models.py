"""The bundled model table (generated from Pi's catalog) and models.json overrides."""

from __future__ import annotations

import pytest

from ds4core.models import ModelTable


def test_bundled_table_records_its_source_and_matches_pi_catalog() -> None:
    table = ModelTable.bundled()
    assert table.source["package"] == "@earendil-works/pi-ai"
    assert table.source["version"] == "1.6.0"
    sonnet = table.get("anthropic", "claude-sonnet-4-5")
    assert sonnet is not None
    assert (sonnet.context_window, sonnet.max_tokens) == (200_000, 64_000)
    assert sonnet.pricing is not None
    p = sonnet.pricing
    assert (p.input, p.output, p.cache_read, p.cache_write) == (3, 15, 0.3, 3.75)
    assert dict(sonnet.prompt_cache) == {"short": 300, "long": 3600}
    gpt5 = table.get("openai", "gpt-5")
    assert gpt5 is not None and gpt5.context_window == 400_000 and dict(gpt5.prompt_cache) == {}
    assert table.get("anthropic", "no-such-model") is None
    assert table.get(None, "claude-sonnet-4-5") is None


def test_catalog_cost_example_from_pi_format_doc() -> None:
    # Pi format §10: sample 01 first response, input 6, cacheWrite 1488, output 91 -> $0.006963.
    pricing = ModelTable.bundled().get("anthropic", "claude-sonnet-4-5").pricing
    cost = pricing.cost(input=6, output=91, cache_read=0, cache_write=1488)
    assert cost == pytest.approx(0.006963, abs=1e-12)


def test_price_tier_applies_above_threshold() -> None:
    pricing = ModelTable.bundled().get("google", "gemini-2.5-pro").pricing
    assert pricing.for_prompt(200_000).input == 1.25
    assert pricing.for_prompt(200_001).input == 2.5
    # 300k uncached input at the tier price of 2.5 USD per million = 0.75 USD.
    assert pricing.cost(input=300_000, output=0, cache_read=0, cache_write=0) == pytest.approx(0.75)


def test_one_hour_cache_writes_cost_twice_the_input_price() -> None:
    pricing = ModelTable.bundled().get("anthropic", "claude-sonnet-4-5").pricing
    # 1000 tokens written with 1-hour retention: 1000 * 2 * 3 / 1e6.
    assert pricing.cost(input=0, output=0, cache_read=0, cache_write=1000, cache_write_1h=1000) == pytest.approx(0.006)


def test_models_json_adds_models_and_merges_overrides() -> None:
    user = {
        "providers": {
            "ollama": {"baseUrl": "http://localhost:11434/v1", "models": [{"id": "qwen2.5-coder:7b"}]},
            "anthropic": {
                "modelOverrides": {
                    "claude-sonnet-4-5": {"cost": {"cacheRead": 0.25}, "promptCache": {"short": 600}},
                    "not-a-model": {"contextWindow": 1},
                }
            },
            "broken": "yes",
        }
    }
    table = ModelTable.bundled().with_user_models(user, origin="/home/u/.pi/agent/models.json")
    local = table.get("ollama", "qwen2.5-coder:7b")
    assert local is not None
    assert (local.context_window, local.max_tokens, local.pricing) == (128_000, 16_384, None)
    sonnet = table.get("anthropic", "claude-sonnet-4-5")
    assert (sonnet.pricing.input, sonnet.pricing.cache_read) == (3, 0.25)
    assert dict(sonnet.prompt_cache) == {"short": 600, "long": 3600}
    assert sonnet.source == "/home/u/.pi/agent/models.json"
    assert table.get("anthropic", "not-a-model") is None
    assert table.warnings == ["/home/u/.pi/agent/models.json: providers.broken is not an object; ignored"]
