"""The planner inputs' chars-v1 cache (`derive.inputs._TokenCache`): its estimates are
`message_tokens`' own, a rebuilt summary (a new dict of the same field objects) is found by
value in the previous index's lists, the reader's own message dicts (assistant, tool results,
system) by identity only (their value keys held ~180 MiB at 50,000 turns), and nothing is kept
between builds (issue 32)."""

from __future__ import annotations

from pathlib import Path

from ds4core.estimate import message_tokens
from ds4sessions.derive.inputs import _STABLE_ROLES, _TokenCache, _value_key
from ds4sessions.agents.pi.live import LiveSession


def test_estimates_hits_and_kept_keys(sample01: Path) -> None:
    messages = list(LiveSession(sample01).refresh(force=True).context.messages)
    summary = {"role": "compactionSummary", "summary": "what happened so far", "tokensBefore": 1000, "timestamp": 5}
    cache = _TokenCache()
    first = cache.estimate(messages + [summary])
    assert first == [message_tokens(m) for m in messages + [summary]]
    assert cache.misses == len(messages) + 1
    assert vars(cache) == {"misses": len(messages) + 1}  # nothing kept between builds (issue 32)
    rebuilt = dict(summary)  # what the next context build makes: a new dict, the same field objects
    known = messages + [summary]  # the previous index's messages and estimates
    again = cache.estimate(messages + [rebuilt], known, first)
    assert again == first and cache.misses == len(messages) + 1  # all found (by identity, or by value)
    # the reader's own dicts (assistant, tool results, system) are found by identity only
    stable = next(m for m in messages if m.get("role") in _STABLE_ROLES)
    assert cache.estimate([dict(stable)], known, first) == [message_tokens(stable)]
    assert cache.misses == len(messages) + 2
    assert _value_key(rebuilt) == _value_key(summary)
    # an append's new messages are estimated
    assert cache.extend([rebuilt]) == [message_tokens(rebuilt)] and cache.misses == len(messages) + 3
