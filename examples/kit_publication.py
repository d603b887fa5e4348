"""Knowledge publication: anyone proposes a change to the support handbook, only an editor
publishes it, and the support agent is given the official handbook only, never a candidate.

Run it with ``python examples/kit_publication.py``; the model is a scripted function
(``fevex.testing.FunctionModel``) that prints the refund rule it was given, so it needs no
key and no network.
"""

from __future__ import annotations

import json
from typing import Any

from fevex import FevexRunError, create_fevex, define_agent
from fevex.kits.publication import RequiredRead, define_knowledge_publication
from fevex.models import ModelInput
from fevex.runtime import ExecutionContext
from fevex.testing import FunctionModel

HANDBOOK = """# Support handbook
Be kind.
## Refunds
Refunds within {days} days of purchase.
## Shipping
Two working days.
"""


def may(action: str, request: dict[str, Any], context: ExecutionContext) -> None:
    """Anyone reads and proposes; only editors publish or reject."""
    role = (context.actor or {}).get("type")
    if action in {"publish", "reject"} and role != "editor":
        raise PermissionError(f"{role} may not {action}")


def sources_current(sources: list[dict[str, Any]], context: ExecutionContext) -> None:
    """The app checks each source is still at the version the candidate was written from."""
    current = {"policy-2026": "3"}
    for source in sources:
        if current.get(source["id"]) != source["version"]:
            raise LookupError(f"{source['id']} is not at version {source['version']}")


handbook = define_knowledge_publication(
    name="handbook",
    authorize=may,
    verify_sources=sources_current,
    max_candidates=32,
    candidate_retention=7 * 86_400,
    required_reads=[RequiredRead("handbook", section="Refunds")],
    max_read_chars=12_000,
)


def support_model(model_input: ModelInput) -> str:
    """Answers with the refund rule of the handbook it was given as data."""
    for message in model_input.messages:
        if "context provider 'handbook'" in message.text:
            items = json.loads(message.text.split("<data>\n", 1)[1].rsplit("\n</data>", 1)[0])
            # The catalog first, then the required read (the Refunds section).
            if items:
                return str(items[1]["content"]["text"].splitlines()[-1])
    return "I have no handbook."


support = define_agent(
    name="support", instructions="Answer from the handbook.", context=["handbook"]
)
editor = ExecutionContext(actor={"id": "ana", "type": "editor"}, namespace="shop")
agent_user = ExecutionContext(actor={"id": "sam", "type": "agent-user"}, namespace="shop")
source = {"id": "policy-2026", "version": "3"}


def ask() -> Any:
    return app.run_agent_sync("support", "How long for refunds?", context=agent_user).output


with create_fevex(
    models={"default": FunctionModel(support_model)},
    agents=[support],
    context_providers=[handbook.context_provider()],
) as app:
    first = handbook.propose_sync(
        app,
        revision=0,
        document={"id": "handbook", "revision": 1, "body": HANDBOOK.format(days=30)},
        sources=[source],
        context=editor,
    )
    print("agent, a candidate only:", ask())
    done = handbook.publish_sync(
        app, revision=first.revision, candidate_id=first.candidate_id, context=editor
    )
    print("published revision", done.published_revision)

    # Two proposals against the same official set wait beside it; agents still read it.
    longer = handbook.propose_sync(
        app,
        revision=done.revision,
        document={"id": "handbook", "revision": 2, "body": HANDBOOK.format(days=60)},
        sources=[source],
        context=agent_user,
    )
    shorter = handbook.propose_sync(
        app,
        revision=longer.revision,
        document={"id": "handbook", "revision": 2, "body": HANDBOOK.format(days=14)},
        sources=[source],
        context=agent_user,
    )
    print("agent, two candidates pending:", ask())
    try:
        handbook.publish_sync(
            app, revision=shorter.revision, candidate_id=longer.candidate_id, context=agent_user
        )
    except FevexRunError as error:
        print("an agent user publishing:", error.code)
    done = handbook.publish_sync(
        app, revision=shorter.revision, candidate_id=longer.candidate_id, context=editor
    )
    print("agent, after the editor published:", ask())
    try:
        handbook.publish_sync(
            app, revision=done.revision, candidate_id=shorter.candidate_id, context=editor
        )
    except FevexRunError as error:
        print("the other candidate:", error.code)
    state = handbook.get_sync(app, context=editor)
    print(
        f"record revision {state.revision}, published revision {state.published_revision}, "
        f"{len(state.candidates)} candidate(s) pending"
    )
