"""Skills: standing instructions an agent takes on by naming them."""

from __future__ import annotations

from dataclasses import dataclass

from fevex._ground.names import is_valid_name
from fevex.errors import FevexConfigurationError

__all__ = ["SkillDefinition", "define_skill"]


@dataclass(frozen=True, slots=True)
class SkillDefinition:
    """A skill: instructions written by the app's developers, given to every agent that
    names it in ``skills=``. Unlike a context provider's items, they are instructions."""

    name: str
    instructions: str
    description: str | None = None

    def check(self) -> None:
        """``INVALID_CONTEXT_PROVIDER`` for a name or instructions that cannot be used."""
        if not is_valid_name(self.name):
            raise FevexConfigurationError(
                "INVALID_CONTEXT_PROVIDER",
                f"Skill name {self.name!r} must match [A-Za-z0-9_-]{{1,64}}.",
            )
        if not isinstance(self.instructions, str) or not self.instructions.strip():
            raise FevexConfigurationError(
                "INVALID_CONTEXT_PROVIDER",
                f"Skill {self.name}: instructions must be non-empty text.",
            )


def define_skill(
    *, name: str, instructions: str, description: str | None = None
) -> SkillDefinition:
    """Define a skill; register it in ``create_fevex(context_providers=[...])``."""
    skill = SkillDefinition(name, instructions, description)
    skill.check()
    return skill
