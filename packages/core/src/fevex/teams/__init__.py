from fevex.teams.definition import TeamDefinition, TeamLimits, TeamMember, define_team
from fevex.teams.relayed_event import TeamRelayedEvent
from fevex.teams.step import TeamStep

__all__ = [
    "TeamDefinition",
    "TeamLimits",
    "TeamMember",
    "TeamRelayedEvent",
    "TeamStep",
    "define_team",
]
