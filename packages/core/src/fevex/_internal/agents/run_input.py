"""What a run starts from: the user message the model sees and the JSON the run keeps."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fevex._internal.composition.registry import PreparedAgent
from fevex._internal.composition.tool_runner import summarize
from fevex.errors import FevexRunError
from fevex.messages import Message
from fevex.schemas.schema import ensure_json


def run_input(prepared: PreparedAgent, input: Any) -> tuple[Message, Any]:
    """The run's user message and the JSON its run record keeps, checked to be storable;
    with an ``input_schema``, the validated (and transformed) value."""
    schema = prepared.input_schema
    if schema is None:
        message = _user_message(input)
        input_json = input if isinstance(input, str) else [p.to_json() for p in message.content]
    else:
        try:
            input_json = schema.to_json(schema.validate(input))
        except Exception as error:
            raise FevexRunError(
                "INVALID_INPUT",
                f"The input of agent {prepared.definition.name} is invalid: {summarize(error)}",
                category="validation",
            ) from None
    try:
        ensure_json(input_json)
    except TypeError as error:
        raise FevexRunError(
            "INVALID_INPUT",
            f"The input cannot be stored by any run store: {error}.",
            category="validation",
        ) from None
    if schema is not None:
        text = input_json if isinstance(input_json, str) else json.dumps(input_json)
        message = Message.user(text)
    return message, input_json


def _user_message(input: Any) -> Message:
    if isinstance(input, str):
        return Message.user(input)
    if isinstance(input, Message):
        if input.role != "user":
            raise FevexRunError("INVALID_INPUT", "An input message must have the user role.")
        return input
    if isinstance(input, Sequence) and input and all(hasattr(p, "to_json") for p in input):
        return Message.user(input)
    raise FevexRunError(
        "INVALID_INPUT",
        "Agent input must be text, a user Message or a list of content parts.",
        category="validation",
    )
