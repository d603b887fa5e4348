from fevex.teams.definition import TeamDefinition, TeamLimits, TeamMember, define_team
from fevex.teams.step import TeamStep

__all__ = ["TeamDefinition", "TeamLimits", "TeamMember", "TeamStep", "define_team"]
