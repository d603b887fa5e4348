"""A thin wrapper that counts what the runtime asks of its run store, and how long it takes.

Each ``create_execution`` and ``commit_execution`` is one store transaction that commits
(the contract makes each atomic), so their count is the number of commits a run costs.
The time spent awaiting the store, against a run's whole time, says where the time of a
durable run goes. The wrapper is used only for the counted runs, never for the timed ones.
"""

from __future__ import annotations

import inspect
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

WRITES = (
    "create_execution",
    "commit_execution",
    "renew_lease",
    "acquire_lease",
    "take_over_run",
)


class CountingRunStore:
    """Delegates everything to ``store`` and counts calls of its coroutine methods."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.calls: Counter[str] = Counter()
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.store, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute
        return self._counted(name, attribute)

    def _counted(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            start = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return counted

    @property
    def commits(self) -> int:
        """Committed store transactions that write a run: creations and step commits."""
        return self.calls["create_execution"] + self.calls["commit_execution"]

    def per_run(self, runs: int) -> dict[str, float]:
        """Calls per run, by method name (closing the store is not part of a run)."""
        return {name: count / runs for name, count in sorted(self.calls.items()) if name != "close"}
