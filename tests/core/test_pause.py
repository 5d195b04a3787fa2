"""Pause points (`ds4core.pause`): what a long stage's loops call so that the app can pause a
derive pass while an appended line is read and painted (issue 10). They must never change what
a stage computes, must reach the hook every `EVERY` items, and only on the thread that installed
it."""

from __future__ import annotations

import threading
from typing import Callable, Iterable

import pytest

from ds4core import pause
from ds4core.planner import plan_managed_context
from ds4core.budgets import ContextBudget


@pytest.fixture(autouse=True)
def _no_request_left() -> None:
    pause.request(False)
    yield
    pause.request(False)


@pytest.mark.parametrize("make", [
    lambda: [], lambda: list(range(5)), lambda: list(range(256)), lambda: list(range(257)),
    lambda: tuple(range(1000)), lambda: range(3, 2000, 7), lambda: (x * x for x in range(700)),
    lambda: {i: str(i) for i in range(600)}.values(),
])
def test_pausing_yields_every_item_in_order(make: Callable[[], Iterable[int]]) -> None:
    assert list(pause.pausing(make())) == list(make())


def test_hook_runs_once_per_chunk_while_requested_and_only_on_its_thread() -> None:
    calls: list[int] = []

    def hook() -> None:
        calls.append(1)
        pause.request()  # stay requested: every pause point calls the hook

    with pause.hooked(hook):
        pause.request()
        assert sum(pause.pausing(list(range(10 * pause.EVERY)))) == sum(range(10 * pause.EVERY))
    assert len(calls) == 10
    other: list[int] = []
    thread = threading.Thread(target=lambda: other.append(sum(pause.pausing(list(range(5000))))))
    thread.start()
    thread.join()
    assert other == [sum(range(5000))] and len(calls) == 10  # no hook on that thread: nothing called
    pause.pause_point()  # outside `hooked`: the hook is gone
    assert len(calls) == 10


def test_no_request_no_call_and_take_request() -> None:
    calls: list[int] = []
    with pause.hooked(lambda: calls.append(1)):
        list(pause.pausing(list(range(5000))))
        assert calls == []
        pause.request()
        assert pause.take_request() is True and pause.take_request() is False
        list(pause.pausing(list(range(5000))))
    assert calls == []


def _session(groups: int) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = []
    for g in range(groups):
        call = f"c{g}"
        messages += [
            {"role": "user", "content": [{"type": "text", "text": f"step {g} " + "x" * (g % 90)}]},
            {"role": "assistant", "content": [{"type": "toolCall", "id": call, "name": "read", "arguments": {"p": g}}]},
            {"role": "toolResult", "toolCallId": call, "toolName": "read", "content": [{"type": "text", "text": "y" * (40 + g % 300)}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"done {g}"}]},
        ]
    return messages


def test_a_plan_made_with_pauses_equals_the_plan_made_without() -> None:
    messages = _session(2_000)
    budget = ContextBudget(
        context_window=200_000, output_reserve=8_000, safety_margin=2_000, model_input_hard_limit=150_000,
        hard_input_limit=150_000, soft_input_limit=120_000, preferred_input_target=60_000, active_input_budget=60_000,
    )
    plain = plan_managed_context(messages, fixed_tokens=3_000, budget=budget, pinned_message_indices=[5, 77])
    calls: list[int] = []

    def hook() -> None:
        calls.append(1)
        pause.request()

    with pause.hooked(hook):
        pause.request()
        paused = plan_managed_context(messages, fixed_tokens=3_000, budget=budget, pinned_message_indices=[5, 77])
    assert paused == plain
    assert plain.mode == "managed" and len(plain.selected) + len(plain.excluded) == 8_000
    # 8,000 messages, 2,000 groups: the loops over groups and items pause every EVERY of them
    assert len(calls) >= 8_000 // pause.EVERY
