"""The app ``fevex recover`` loads in the hostile-store tests: it answers every run at once
and, like a new deploy, no longer has the agent ``retired``."""

from __future__ import annotations

from fevex import Fevex, create_fevex, define_agent
from fevex.testing import FakeModel


def build_app() -> Fevex:
    return create_fevex(
        models={"default": FakeModel(*[{"output": "recovered"}] * 8)},
        agents=[define_agent(name="worker", instructions="Work.")],
    )
