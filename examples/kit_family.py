"""An agent family: versions of an agent's goal, each a candidate until it is promoted, and a
branch of a conversation continued from the checkpoint a version carries.

Run it with ``python examples/kit_family.py``. Ana creates the family from a first
conversation and promotes it; a fork and a stale promotion show the rules; the fork's
checkpoint continues the conversation as a new run.

The app signs the checkpoints it exports and restores only what its key signed. A real app
reads the key from ``FEVEX_CHECKPOINT_KEY`` (the same in every environment a checkpoint
travels to); this one makes a key of its own for the run.
"""

import asyncio
import secrets
from typing import Any

from pydantic import BaseModel

from fevex import FevexError, create_fevex, define_agent
from fevex.kits.family import FamilyVersion, define_agent_family
from fevex.models import ModelInput
from fevex.runtime import ExecutionContext
from fevex.testing import FunctionModel

ANA = ExecutionContext(actor={"id": "ana", "type": "user"}, namespace="shop")
WITHDRAWN_SOURCES = {"r0"}


class Goal(BaseModel):
    goal: str
    source_revision: str


def may_change(operation: dict[str, Any], family: Any, context: ExecutionContext) -> None:
    if (context.actor or {}).get("id") != "ana":
        raise PermissionError("only ana changes the support family")


def source_is_current(version: FamilyVersion) -> None:
    if version.state["source_revision"] in WITHDRAWN_SOURCES:
        raise ValueError(f"source {version.state['source_revision']} was withdrawn")


def answer(model_input: ModelInput) -> str:
    said = [message.text for message in model_input.messages if message.role == "user"]
    return "noted: " + " / ".join(said)


support = define_agent(name="support", instructions="Answer briefly.")
family = define_agent_family(
    name="support",
    state=Goal,
    max_versions=8,
    retention=7 * 86_400,
    authorize=may_change,
    validate=source_is_current,
)


async def main() -> None:
    async with create_fevex(
        models={"default": FunctionModel(answer)},
        agents=[support],
        checkpoint_key=secrets.token_urlsafe(32),
    ) as app:
        first = await app.run_agent("support", "Refunds take five days.", context=ANA)
        # JSON, signed: no identity, no grants.
        checkpoint = await app.export_checkpoint(first.run_id)

        made = await family.create(
            app, Goal(goal="refunds", source_revision="r1"), checkpoint=checkpoint, context=ANA
        )
        root = made.newest
        print(f"created: {root.status}, active {made.active_id}")
        active = await family.promote(
            app,
            family_id=made.id,
            revision=made.revision,
            candidate_id=root.id,
            expected_active_id=None,
            context=ANA,
        )
        print(f"promoted: active is the first version: {active.active_id == root.id}")

        branch = await family.fork(app, family_id=made.id, parent_id=root.id, context=ANA)
        try:  # decided on an old revision: nothing is written
            await family.promote(
                app,
                family_id=made.id,
                revision=active.revision,
                candidate_id=branch.newest.id,
                expected_active_id=root.id,
                context=ANA,
            )
        except FevexError as error:
            print(f"stale promotion: {error.code}")

        restored = await family.restore(
            app,
            family_id=made.id,
            version_id=branch.newest.id,
            input="And for store credit?",
            context=ANA,
        )
        print(f"branch continues: {restored.output}")
        final = await family.promote(
            app,
            family_id=made.id,
            revision=branch.revision,
            candidate_id=branch.newest.id,
            expected_active_id=root.id,
            context=ANA,
        )
        print(f"revision {final.revision}: " + ", ".join(v.status for v in final.versions))


if __name__ == "__main__":
    asyncio.run(main())
