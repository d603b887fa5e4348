"""A child run's event as a team's stream yields it: marked with the delegation it
belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fevex.events import RunEvent

__all__ = ["TeamRelayedEvent"]


@dataclass(slots=True)
class TeamRelayedEvent(RunEvent):
    """An event of a delegation's child run (``run_id`` is the child's) in the stream of
    ``stream_team`` and the events of ``run_team``: ``team_delegation_id`` is the step id
    of the delegation, ``team_agent_name`` the agent it runs. The stored event is the
    child's own, without either: ``list_events`` of the child returns plain events."""

    team_delegation_id: str
    team_agent_name: str

    @classmethod
    def of(cls, event: RunEvent, delegation_id: str, agent_name: str) -> TeamRelayedEvent:
        return cls(
            event.id,
            event.run_id,
            event.sequence,
            event.type,
            event.occurred_at,
            event.payload,
            delegation_id,
            agent_name,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **RunEvent.to_json(self),
            "team_delegation_id": self.team_delegation_id,
            "team_agent_name": self.team_agent_name,
        }
