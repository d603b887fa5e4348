"""One process of the family promotion race (see tests/test_kit_family.py): promote a
candidate against a given revision, after waiting in ``authorize`` until the other racer
has read the family too; print ``promoted <id>``, or the error code and its reason.

Arguments: family id, revision, candidate id, expected active id, this racer's name.
The store is ``FEVEX_RUN_STORE``; the barrier directory is ``FAMILY_BARRIER``."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from fevex import FevexError, create_fevex, define_agent
from fevex.kits.family import define_agent_family
from fevex.runtime import ExecutionContext
from fevex.testing import FunctionModel

ANA = ExecutionContext(actor={"id": "ana", "type": "user"}, namespace="acme")


def main() -> None:
    family_id, revision, candidate, active, name = sys.argv[1:6]
    barrier = Path(os.environ["FAMILY_BARRIER"])

    def authorize(operation: Any, family: Any, context: Any) -> None:
        # Called after the read: once both racers are here, both hold the same revision.
        (barrier / name).write_text("read")
        waited = time.monotonic() + 30
        while len(list(barrier.iterdir())) < 2:
            if time.monotonic() > waited:
                raise TimeoutError("the other racer never read the family")
            time.sleep(0.01)

    family = define_agent_family(name="goals", authorize=authorize)
    app = create_fevex(
        models={"default": FunctionModel(lambda _: "unused")},
        agents=[define_agent(name="chat", instructions="Chat.")],
        run_store=os.environ["FEVEX_RUN_STORE"],
    )
    with app:
        try:
            done = family.promote_sync(
                app,
                family_id=family_id,
                revision=int(revision),
                candidate_id=candidate,
                expected_active_id=active,
                context=ANA,
            )
        except FevexError as error:
            print(error.code, error.details.get("reason"))
        else:
            print("promoted", done.active_id)


if __name__ == "__main__":
    main()
