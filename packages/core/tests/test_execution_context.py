"""The execution context: validated, plain JSON, and inherited without widening the actor."""

from __future__ import annotations

import pytest

from fevex import FevexRunError
from fevex.runtime import ExecutionContext


def test_a_child_inherits_merges_and_never_replaces_the_parents_actor() -> None:
    parent = ExecutionContext(
        actor={"id": "u-1", "type": "user"},
        namespace="tenant-a",
        attributes={"plan": "pro", "region": "eu"},
        prompt_values={"tone": "formal"},
    )
    child = parent.child(
        ExecutionContext(
            actor={"id": "attacker", "type": "user"},
            attributes={"region": "us"},
            prompt_values={"language": "de"},
        )
    )
    assert child.actor == {"id": "u-1", "type": "user"}
    assert child.namespace == "tenant-a"
    assert child.attributes == {"plan": "pro", "region": "us"}
    assert child.prompt_values == {"tone": "formal", "language": "de"}
    anonymous = ExecutionContext().child(ExecutionContext(actor={"id": "svc", "type": "service"}))
    assert anonymous.actor == {"id": "svc", "type": "service"}
    assert parent.child(None) is parent


def test_a_context_round_trips_through_json() -> None:
    context = ExecutionContext.of({"actor": {"id": "u-1"}, "attributes": {"n": [1, 2]}})
    assert ExecutionContext.from_json(context.to_json()) == context
    assert ExecutionContext.from_json(None) == ExecutionContext()


@pytest.mark.parametrize(
    "fields",
    [
        {"actor": {"type": "user"}},
        {"actor": "u-1"},
        {"namespace": ""},
        {"attributes": {"x": float("nan")}},
        {"attributes": {"x": {1, 2}}},
        {"prompt_values": {"tone": 3}},
        {"tenant": "a"},
    ],
    ids=["actor-without-id", "actor-text", "empty-namespace", "nan", "set", "non-text", "unknown"],
)
def test_a_bad_context_is_refused_with_a_stable_code(fields: dict[str, object]) -> None:
    with pytest.raises(FevexRunError) as caught:
        ExecutionContext.of(fields)
    assert caught.value.code == "INVALID_CONTEXT"
