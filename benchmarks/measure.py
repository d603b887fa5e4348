"""The timing and memory harness every framework script shares.

It uses the standard library only, so it runs unchanged in each framework's own environment.
A framework script describes the scenario with a :class:`Scenario` and calls :func:`report`,
which prints one JSON object (and writes it to ``--out`` when given).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

QUESTION = "What is the status of account 42?"
ANSWER = "Account 42 is active."
INSTRUCTIONS = "Answer account questions clearly."
ACCOUNT_ID = 42
TOOL_NAME = "accounts_get"
TOOL_DESCRIPTION = "Get an account by ID."

# Nothing may reach a model provider or phone home. The nox sessions set these before the
# interpreter starts; setting them here too covers a script run by hand (SDKs that read them
# at import time are also switched off in code by their scripts).
OFFLINE_ENVIRONMENT = {
    "OPENAI_API_KEY": "sk-offline-benchmark",
    "AGNO_TELEMETRY": "false",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
}


@dataclass(frozen=True)
class Budget:
    """How long a figure is measured: a repeat is sized to about ``repeat_seconds`` once a
    probe lasts ``probe_seconds``, after ``warmup_seconds``; ``repeats`` repeats and
    ``import_repeats`` fresh interpreters give the medians."""

    repeat_seconds: float
    probe_seconds: float
    warmup_seconds: float
    repeats: int
    import_repeats: int


FULL = Budget(
    repeat_seconds=0.5, probe_seconds=0.05, warmup_seconds=0.3, repeats=5, import_repeats=5
)
# --smoke: every step runs once or twice, to show the script still works; figures mean nothing.
SMOKE = Budget(
    repeat_seconds=0.0, probe_seconds=0.0, warmup_seconds=0.0, repeats=1, import_repeats=1
)


def reply_to(tool_output: object) -> str:
    """The fake model's final answer, given what the tool returned in that framework's form.

    It refuses a tool error (which some frameworks hand back to the model as a string), so a
    run that reaches :data:`ANSWER` has really called the tool with valid input.
    """
    if "active" not in str(tool_output):
        raise RuntimeError(f"the tool did not return the account: {tool_output!r}")
    return ANSWER


@dataclass(frozen=True)
class Scenario:
    """One framework's version of the benchmark scenario.

    ``run_sync`` and ``run_async`` perform one full agent run (model asks for the tool, the
    tool answers, the model replies) and return the final text. ``define_agent(i)`` builds
    the i-th agent definition from a tool and model built once beforehand.
    """

    framework: str
    distribution: str
    import_statement: str
    tool_kind: str
    run_sync: Callable[[], Any]
    run_async: Callable[[], Awaitable[Any]]
    define_agent: Callable[[int], object]


def report(scenario: Scenario) -> None:
    for name, value in OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    parser = argparse.ArgumentParser(description=f"Overhead benchmark for {scenario.framework}")
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    parser.add_argument("--smoke", action="store_true", help="each step once: does it run")
    arguments = parser.parse_args()
    budget = SMOKE if arguments.smoke else FULL

    _check_scenario(scenario)
    sync = _median_per_call(_sync_repeat(scenario.run_sync), budget)
    in_loop = _median_per_call(_async_repeat(scenario.run_async), budget)
    construction = _median_per_call(_definition_repeat(scenario.define_agent), budget)
    result = {
        "framework": scenario.framework,
        "version": metadata.version(scenario.distribution),
        "python": platform.python_version(),
        "tool_kind": scenario.tool_kind,
        "sync_us_per_run": sync.microseconds,
        "sync_runs_per_second": 1e6 / sync.microseconds,
        "async_us_per_run": in_loop.microseconds,
        "async_runs_per_second": 1e6 / in_loop.microseconds,
        "construction_us_per_agent": construction.microseconds,
        "memory_bytes_per_agent": _memory_per_definition(scenario.define_agent, construction.calls),
        "import_statement": scenario.import_statement,
        "import_ms": _import_milliseconds(scenario.import_statement, budget.import_repeats),
        "calls_per_repeat": {
            "sync": sync.calls,
            "async": in_loop.calls,
            "construction": construction.calls,
        },
        "repeats": budget.repeats,
        "smoke": arguments.smoke,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if arguments.out is not None:
        arguments.out.parent.mkdir(parents=True, exist_ok=True)
        arguments.out.write_text(text + "\n", encoding="utf-8")


@dataclass(frozen=True)
class _Timing:
    microseconds: float
    calls: int


def _check_scenario(scenario: Scenario) -> None:
    # A benchmark of a run that silently went wrong measures nothing; check the answer once.
    outputs = [scenario.run_sync(), asyncio.run(_await(scenario.run_async))]
    if any(output != ANSWER for output in outputs):
        raise RuntimeError(f"{scenario.framework}: expected {ANSWER!r}, got {outputs!r}")


async def _await(call: Callable[[], Awaitable[Any]]) -> Any:
    return await call()


def _sync_repeat(call: Callable[[], Any]) -> Callable[[int], float]:
    def repeat(calls: int) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            call()
        return time.perf_counter() - start

    return repeat


def _async_repeat(call: Callable[[], Awaitable[Any]]) -> Callable[[int], float]:
    # Timed inside the event loop: the cost of the runs, not of starting a loop per repeat.
    async def calls_in_loop(calls: int) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            await call()
        return time.perf_counter() - start

    return lambda calls: asyncio.run(calls_in_loop(calls))


def _definition_repeat(define_agent: Callable[[int], object]) -> Callable[[int], float]:
    # Each agent gets its own name and all stay alive, as in an application that defines many.
    def repeat(calls: int) -> float:
        gc.collect()
        start = time.perf_counter()
        agents = [define_agent(index) for index in range(calls)]
        elapsed = time.perf_counter() - start
        del agents
        return elapsed

    return repeat


def _median_per_call(repeat: Callable[[int], float], budget: Budget) -> _Timing:
    """Warm up, size a repeat to the budget's length, and take the median of the repeats."""
    calls = 1
    while (elapsed := repeat(calls)) < budget.probe_seconds:
        calls *= 2
    calls = max(1, math.ceil(calls * budget.repeat_seconds / elapsed))
    deadline = time.perf_counter() + budget.warmup_seconds
    while time.perf_counter() < deadline:
        repeat(max(1, calls // 10))
    seconds = statistics.median(repeat(calls) for _ in range(budget.repeats))
    return _Timing(seconds / calls * 1e6, calls)


def _memory_per_definition(define_agent: Callable[[int], object], count: int) -> float:
    """Bytes still allocated per agent definition while all of them are alive."""
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        agents = [define_agent(index) for index in range(count)]
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del agents
    return (after - before) / count


def _import_milliseconds(statement: str, repeats: int) -> float:
    """Median import time in a fresh interpreter, so nothing is cached in ``sys.modules``."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    environment = {**os.environ, **OFFLINE_ENVIRONMENT}
    seconds = []
    for _ in range(repeats):
        completed = subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            env=environment,
        )
        seconds.append(float(completed.stdout.split()[-1]))
    return statistics.median(seconds) * 1e3
