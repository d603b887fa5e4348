"""A tool returns images and files beside its value (``fevex.tools.ToolOutput``): they reach
the model on the tool result (``ToolResultPart.content``), are kept as plain JSON in the
checkpoint (whose export signature covers them) and in cassettes, are named without their
data in events, and are bounded: a part that breaks a rule fails with
``TOOL_OUTPUT_INVALID`` before anything is stored."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from fevex import FevexRunError, ToolContext, create_fevex, define_agent, define_tool
from fevex.messages import (
    FilePart,
    ImagePart,
    Message,
    TextPart,
    ToolResultPart,
    content_part_from_json,
    message_from_json,
)
from fevex.models import ModelResult, ToolCall
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel, FunctionModel, record_model, replay_model
from fevex.tools import ToolOutput

pytestmark = pytest.mark.anyio

KEY = "tool-media-tests-checkpoint-key-0123456789abcdef"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(24)).decode()
PDF = base64.b64encode(b"%PDF-1.4\n").decode()
PARTS = (ImagePart("image/png", data=PNG), FilePart("application/pdf", data=PDF, name="a.pdf"))


def shot_tool(parts: Any, value: Any = None, **options: Any) -> Any:
    @define_tool(name="shot", **options)
    def shot(page: str) -> ToolOutput:
        """Screenshot a page."""
        return ToolOutput({"page": page} if value is None else value, parts=parts)

    return shot


def shot_model() -> FakeModel:
    return FakeModel(
        {"tool_calls": [{"id": "c1", "name": "shot", "input": {"page": "home"}}]},
        {"output": "Seen."},
    )


def app_with(tool: Any, model: Any, **options: Any) -> Any:
    agent = define_agent(name="viewer", instructions="Look.", tools=["shot"])
    return create_fevex(models={"default": model}, agents=[agent], tools=[tool], **options)


async def test_the_parts_reach_the_model_and_the_checkpoint_as_plain_json() -> None:
    store = InMemoryRunStore()
    model = shot_model()
    result = await app_with(shot_tool(PARTS), model, run_store=store).run_agent("viewer", "Go.")
    assert result.output == "Seen."
    (part,) = model.calls[1].messages[-1].content
    assert part == ToolResultPart("c1", "shot", {"page": "home"}, content=PARTS)

    checkpoint = await store.get_checkpoint(result.run_id)
    assert checkpoint is not None
    stored = checkpoint["pending"]["results"][0]
    assert json.loads(json.dumps(stored)) == stored  # plain JSON
    assert stored["content"] == [
        {"type": "image", "media_type": "image/png", "data": PNG, "url": None},
        {
            "type": "file",
            "media_type": "application/pdf",
            "data": PDF,
            "url": None,
            "name": "a.pdf",
        },
    ]
    assert content_part_from_json(stored) == part

    (completed,) = [e.payload for e in result.events if e.type == "tool.completed"]
    assert completed["content"] == [
        {"type": "image", "media_type": "image/png", "bytes": 32},
        {"type": "file", "media_type": "application/pdf", "name": "a.pdf", "bytes": 9},
    ]
    assert PNG not in json.dumps([event.to_json() for event in result.events])


async def test_a_result_without_media_keeps_its_former_json() -> None:
    part = ToolResultPart("c1", "shot", "text")
    assert part.to_json() == {
        "type": "tool-result",
        "id": "c1",
        "name": "shot",
        "output": "text",
        "is_error": False,
    }
    message = Message("tool", (ToolResultPart("c1", "shot", "x", content=PARTS),))
    assert message_from_json(json.loads(json.dumps(message.to_json()))) == message
    with pytest.raises(ValueError, match="image and file parts"):
        content_part_from_json({**part.to_json(), "content": [TextPart("no").to_json()]})


async def test_a_signed_checkpoint_carries_the_parts_and_still_verifies() -> None:
    seen: list[tuple[Any, ...]] = []

    def answer(model_input: Any) -> Any:
        results = [p for m in model_input.messages for p in m.content if p.type == "tool-result"]
        seen.append(tuple(part.content for part in results))
        if not results:
            return ModelResult(tool_calls=(ToolCall("c1", "shot", {"page": "home"}),))
        return "Seen."

    tool = shot_tool(PARTS)
    app = app_with(tool, FunctionModel(answer), checkpoint_key=KEY)
    result = await app.run_agent("viewer", "Go.")
    exported = await app.export_checkpoint(result.run_id)
    assert exported["signature"].startswith("hmac-sha256:")
    restored = await app_with(tool, FunctionModel(answer), checkpoint_key=KEY).restore_checkpoint(
        exported, "And now?"
    )
    assert restored.output == "Seen."
    assert seen[-1] == (PARTS,)  # the restored conversation still shows the image

    forged = json.loads(json.dumps(exported))
    tool_message = next(m for m in forged["transcript"] if m["role"] == "tool")
    tool_message["content"][0]["content"][0]["data"] = base64.b64encode(b"forged").decode()
    with pytest.raises(FevexRunError) as caught:
        await app.restore_checkpoint(forged, "Again?")
    assert caught.value.code == "CHECKPOINT_SIGNATURE_INVALID"


async def test_a_cassette_records_and_replays_the_parts(tmp_path: Path) -> None:
    cassette = tmp_path / "viewer.json"
    recorded = await app_with(shot_tool(PARTS), record_model(shot_model(), cassette)).run_agent(
        "viewer", "Go."
    )
    assert PNG in cassette.read_text()
    replayed = await app_with(shot_tool(PARTS), replay_model(cassette)).run_agent("viewer", "Go.")
    assert replayed.output == recorded.output == "Seen."
    # Other media than recorded is another input: the replay refuses it.
    other = (ImagePart("image/png", data=base64.b64encode(b"\x89PNG\r\n\x1a\nother").decode()),)
    with pytest.raises(FevexRunError) as caught:
        await app_with(shot_tool(other), replay_model(cassette)).run_agent("viewer", "Go.")
    assert caught.value.code == "CASSETTE_MISMATCH"


async def test_the_value_is_validated_by_the_output_schema() -> None:
    assert shot_tool(PARTS).output_schema is None  # -> ToolOutput: any JSON value
    typed = shot_tool(PARTS, value={"page": 3}, output_schema=dict[str, str])
    with pytest.raises(FevexRunError) as caught:
        await app_with(typed, shot_model()).run_agent("viewer", "Go.")
    assert caught.value.code == "TOOL_OUTPUT_INVALID"


BIG = base64.b64encode(bytes(ToolOutput.MAX_PART_BYTES + 1)).decode()
FOUR_MIB = base64.b64encode(bytes(4 * 1024 * 1024)).decode()


@pytest.mark.parametrize(
    ("parts", "reason"),
    [
        ([ImagePart("image/png", data="not base64!")], "not valid base64"),
        ([ImagePart("image/png", data=BIG)], "exceeds"),
        ([FilePart("audio/wav", data=FOUR_MIB)] * 3, "in all"),
        ([ImagePart("image/png", data=PNG)] * (ToolOutput.MAX_PARTS + 1), "more than"),
        ([ImagePart("application/pdf", data=PDF)], "not an image type"),
        ([FilePart("PDF", data=PDF)], "no valid media type"),
        ([ImagePart("image/png")], "either base64 data or a url"),
        ([ImagePart("image/png", data=PNG, url="https://example.com/a.png")], "either"),
        ([ImagePart("image/png", url="javascript:alert(1)")], "not a short http(s) URL"),
        ([FilePart("application/pdf", data=PDF, name="a\nb.pdf")], "name"),
        ([TextPart("words")], "not an image or a file"),
    ],
)
async def test_parts_that_break_a_rule_fail_the_call(parts: list[Any], reason: str) -> None:
    store = InMemoryRunStore()
    with pytest.raises(FevexRunError) as caught:
        await app_with(shot_tool(parts), shot_model(), run_store=store).run_agent("viewer", "Go.")
    assert caught.value.code == "TOOL_OUTPUT_INVALID"
    assert reason in caught.value.message
    assert len(caught.value.message) < 300
    checkpoint = await store.get_checkpoint(caught.value.run_id or "")
    assert checkpoint is not None
    assert checkpoint["pending"]["results"] == []


async def test_a_credential_in_a_file_name_never_leaves_the_call() -> None:
    secret = "s3cret-file-name-credential"

    @define_tool(name="shot", credentials=["key"])
    async def shot(page: str, context: ToolContext) -> ToolOutput:
        """Screenshot a page."""
        key = await context.get_credential("key")
        return ToolOutput("done", parts=[FilePart("application/pdf", data=PDF, name=key)])

    app = app_with(shot, shot_model(), credentials={"key": secret})
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("viewer", "Go.")
    assert caught.value.code == "TOOL_OUTPUT_CONTAINS_CREDENTIAL"
