"""``RunResult``: what a run that ended gives back to the caller that waited for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from fevex.events import RunEvent
from fevex.models import Usage

__all__ = ["RunResult"]

OutputT = TypeVar("OutputT")


@dataclass(slots=True)
class RunResult(Generic[OutputT]):
    """A finished run: ``output`` is the validated value (the agent's output schema type,
    or text), ``events`` every event this call committed."""

    run_id: str
    session_id: str
    output: OutputT
    usage: Usage
    events: tuple[RunEvent, ...]
