"""Pending inputs: what a running tool call asks a person, and the answers ``resume_run``
takes.

A tool call (an MCP server's elicitation, through fevex-mcp) may ask a person for a few
values while it runs: the run stays ``running`` in the process that executes it (its lease
renewed, the tool call in flight), and lists the request, a :class:`PendingInput`, on
:attr:`~fevex.runtime.AgentRun.inputs` (stored in the run's ``pause`` as
``{"reason": "input", "inputs": [...]}``). A person answers with
``pending.answer(content=..., actor=...)``, ``pending.decline(actor=...)`` or
``pending.cancel(actor=...)``, the :class:`InputAnswer` passed to ``resume_run`` from any
process sharing the store.

The answer is checked here, before anything is written: a mapping of JSON values, bounded,
and, once the request's schema defaults fill what it leaves out, valid for that schema
(``INPUT_INVALID`` otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fevex._ground.storable_text import UNSTORABLE_TEXT
from fevex.errors import (
    FevexRunError,
    InputAction,
    InputAnswer,
    PendingInput,
    check_actor,
)

__all__ = [
    "MAX_ANSWER_CHARS",
    "InputAction",
    "InputAnswer",
    "PendingInput",
    "checked_content",
    "input_answer",
    "pending_inputs",
    "with_defaults",
]

#: The largest accepted answer, in characters of its compact JSON.
MAX_ANSWER_CHARS = 100_000


def pending_inputs(pause: Any, run_id: str | None = None) -> tuple[PendingInput, ...]:
    """The inputs a running run's ``pause`` lists (none for a pause of another kind)."""
    if not isinstance(pause, Mapping) or pause.get("reason") != "input":
        return ()
    listed = pause.get("inputs")
    if not isinstance(listed, list):
        return ()
    return tuple(
        PendingInput.from_json(item, run_id) for item in listed if isinstance(item, Mapping)
    )


def input_answer(decision: Any) -> InputAnswer | None:
    """``decision`` as a checked :class:`InputAnswer` when it is one (or a mapping with
    ``"type": "input"``); ``None`` for any other decision. ``INVALID_ARGUMENT`` for an
    answer that names no input, an unknown action, content without ``accept`` (or
    ``accept`` without content), content that is not a bounded mapping of JSON values,
    or an actor without an ``id``."""
    if isinstance(decision, InputAnswer):
        fields: Mapping[str, Any] = {
            "input_id": decision.input_id,
            "action": decision.action,
            "actor": decision.actor,
            "content": decision.content,
        }
    elif isinstance(decision, Mapping) and decision.get("type") == "input":
        fields = decision
    else:
        return None
    input_id, action = fields.get("input_id"), fields.get("action")
    if not isinstance(input_id, str) or not input_id:
        raise _invalid("An input answer names its input_id.")
    if action not in ("accept", "decline", "cancel"):
        raise _invalid("An input answer's action is 'accept', 'decline' or 'cancel'.")
    actor = fields.get("actor")
    check_actor(actor)
    assert isinstance(actor, Mapping)
    content = fields.get("content")
    if (content is None) == (action == "accept"):
        raise _invalid("Content goes with 'accept', and only with it.")
    if content is not None:
        content = _bounded_json(content)
    return InputAnswer(input_id, action, dict(actor), content)


def with_defaults(content: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``content`` with each top-level property it leaves out that ``schema`` gives a
    ``default`` for set to that default (as SEP-1034 asks of MCP clients)."""
    filled = dict(content)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, described in properties.items():
            if name not in filled and isinstance(described, Mapping) and "default" in described:
                filled[name] = described["default"]
    return filled


def checked_content(content: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``content`` with the schema's defaults, once valid for ``schema``;
    ``INPUT_INVALID`` naming where it is not (never the values)."""
    from fevex.schemas import JsonSchema, JsonSchemaError

    filled = with_defaults(content, schema)
    if not schema:
        return filled
    try:
        JsonSchema(schema).validate(filled)
    except JsonSchemaError:
        raise FevexRunError(
            "INPUT_INVALID", "The request's schema is not JSON Schema; it can only be declined."
        ) from None
    except ValueError as error:
        raise FevexRunError(
            "INPUT_INVALID",
            f"The answer does not match the requested schema: {str(error)[:500]}",
        ) from None
    return filled


def _bounded_json(content: Any) -> dict[str, Any]:
    if not isinstance(content, Mapping):
        raise _invalid("An input answer's content is a mapping of JSON values.")
    try:
        text = json.dumps(dict(content), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        raise _invalid("An input answer's content is a mapping of JSON values.") from None
    if len(text) > MAX_ANSWER_CHARS or UNSTORABLE_TEXT.search(text):
        raise _invalid(
            f"An input answer's content is at most {MAX_ANSWER_CHARS} characters of JSON "
            "a store can keep (no NUL)."
        )
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _invalid(message: str) -> FevexRunError:
    return FevexRunError("INVALID_ARGUMENT", message)
