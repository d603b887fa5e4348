"""The many-calls scenario both sides share; the standard library only, so that it runs
unchanged in each framework's own environment.

A run makes ``calls`` tool calls and then answers. In the ``steps`` shape the model asks for
one call per model step (``calls`` + 1 model steps); in the ``batch`` shape it asks for all
of them in its first step (2 model steps). Each fake model decides from the last message of
the conversation only (the id of the last tool result), so that the model itself costs the
same at every step and whatever grows with the run is the framework's.
"""

from __future__ import annotations

from dataclasses import dataclass

SHAPES = ("steps", "batch")
SIZES = (1, 10, 100, 300)
SMOKE_SIZES = (1, 3)
QUESTION = "Check the accounts, then say how many you checked."
INSTRUCTIONS = "Check every account you are asked about."
TOOL_NAME = "accounts_get"
TOOL_DESCRIPTION = "Get an account by ID."


def answer(calls: int) -> str:
    return f"Checked {calls} accounts."


def call_id(index: int) -> str:
    return f"call-{index}"


def index_of(tool_call_id: str) -> int:
    return int(tool_call_id.removeprefix("call-"))


@dataclass(slots=True)
class Plan:
    """What the fake model of the current run does; set before each run."""

    shape: str = "steps"
    calls: int = 1

    def next_calls(self, last_call_id: str | None) -> list[int]:
        """The calls to ask for after the tool result of ``last_call_id`` (``None``: the
        run's first step); an empty list means answer now."""
        if last_call_id is None:
            return [0] if self.shape == "steps" else list(range(self.calls))
        following = index_of(last_call_id) + 1
        return [following] if following < self.calls else []


@dataclass(slots=True)
class Counter:
    """How many times the tool ran: a run that answered without all its calls is wrong."""

    calls: int = 0


def check(output: object, plan: Plan, counter: Counter) -> None:
    if output != answer(plan.calls) or counter.calls != plan.calls:
        raise RuntimeError(
            f"{plan.shape} run of {plan.calls} calls: answered {output!r} "
            f"after {counter.calls} tool calls"
        )
