"""What :func:`fevex.create_fevex` checks of its arguments besides the composition: the
lease, the observability settings, and the durable tasks (whose kind is imported only for
an app that has some)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fevex._internal.composition.registry import Composition, Problems
from fevex._internal.engine.kernel import KindFactory
from fevex.errors import FevexConfigurationError

__all__ = ["check_lease_seconds", "check_observability", "with_tasks"]


def with_tasks(
    run_kinds: Mapping[str, KindFactory],
    tasks: Iterable[Any],
    composition: Composition,
    problems: Problems,
) -> Mapping[str, KindFactory]:
    """``run_kinds`` and, for an app with durable tasks, their kind (the kit is imported
    only then)."""
    given = list(tasks)
    if not given:
        return run_kinds
    from fevex.kits.tasks.task_kind import task_run_kinds

    taken = {
        *composition.agents,
        *(name for name, _ in composition.workflows),
        *(name for name, _ in composition.teams),
    }
    try:
        return {**run_kinds, **task_run_kinds(given, taken)}
    except FevexConfigurationError as problem:
        problems.add(problem)
        return run_kinds


def check_lease_seconds(lease_seconds: object, problems: Problems) -> None:
    if (
        not isinstance(lease_seconds, int | float)
        or isinstance(lease_seconds, bool)
        or lease_seconds <= 0
    ):
        problems.add(
            FevexConfigurationError("INVALID_CONFIG", "lease_seconds must be positive seconds.")
        )


def check_observability(observability: object, problems: Problems) -> None:
    if observability is None:
        return
    from fevex.observability.configuration import Observability

    if isinstance(observability, Observability):
        for problem in observability.problems():
            problems.add(problem)
    else:
        problems.add(
            FevexConfigurationError(
                "INVALID_OBSERVABILITY",
                f"observability must be an Observability, not {type(observability).__name__}.",
            )
        )
