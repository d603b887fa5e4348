"""What goes on the wire: paths, strict tools, messages, thinking passback, options."""

import json
from typing import Any

import pytest

from fevex.errors import FevexRunError
from fevex.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from fevex.models import ModelInput, ToolSpec

pytestmark = pytest.mark.anyio

ACCOUNTS = ToolSpec(
    "accounts_get",
    "Get an account by ID.",
    {
        "type": "object",
        "properties": {"account_id": {"type": "integer"}},
        "required": ["account_id"],
        "additionalProperties": False,
    },
)
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


def _answer(wire: Any, text: str = "Done.") -> list[Any]:
    return [wire.chunk(content=text), wire.chunk(finish_reason="stop", usage=wire.usage())]


async def test_strict_tools_go_to_the_beta_endpoint_marked_strict(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(*_answer(wire))

    await drain(deepseek(), ModelInput((Message.user("Account 42?"),), (ACCOUNTS,)))

    (request,) = deepseek_server.requests
    assert request.method == "POST"
    assert request.path == "/beta/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-loopback-test-key"
    assert request.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "accounts_get",
                "description": "Get an account by ID.",
                "parameters": ACCOUNTS.input_schema,
                "strict": True,
            },
        }
    ]
    assert request.body["model"] == "deepseek-v4-flash"
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert "tool_choice" not in request.body


async def test_a_step_without_tools_uses_the_regular_endpoint(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(*_answer(wire))

    await drain(deepseek(), ModelInput((Message.user("Hi"),), max_output_tokens=256))

    (request,) = deepseek_server.requests
    assert request.path == "/chat/completions"
    assert request.body["max_tokens"] == 256
    assert "tools" not in request.body
    assert "response_format" not in request.body


async def test_best_effort_tools_are_forwarded_unchecked_to_the_regular_endpoint(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    loose = ToolSpec(
        "notes_add",
        "Add a note.",
        {"type": "object", "properties": {"text": {"type": "string", "minLength": 1}}},
    )
    deepseek_server.stream(*_answer(wire))

    await drain(
        deepseek(schema_policy="best-effort"), ModelInput((Message.user("Note it"),), (loose,))
    )

    (request,) = deepseek_server.requests
    assert request.path == "/chat/completions"
    assert request.body["tools"][0]["function"] == {
        "name": "notes_add",
        "description": "Add a note.",
        "parameters": loose.input_schema,
    }


async def test_a_v1_base_url_still_finds_the_beta_endpoint(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(*_answer(wire))

    await drain(
        deepseek(base_url=f"{deepseek_server.url}/v1"),
        ModelInput((Message.user("Account 42?"),), (ACCOUNTS,)),
    )

    assert [r.path for r in deepseek_server.requests] == ["/beta/chat/completions"]


async def test_conversation_messages_map_to_chat_messages(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(*_answer(wire))
    messages = (
        Message.system("Be brief."),
        Message.user([TextPart("First part."), TextPart("Second part.")]),
        Message.assistant("Earlier answer."),
        Message.user("Check 42."),
        Message.assistant(
            [
                ThinkingPart("Need the account."),
                ToolCallPart("call_1", "accounts_get", {"account_id": 42}),
                ToolCallPart("call_2", "accounts_get", {"account_id": 43}),
            ]
        ),
        Message(
            "tool",
            (
                ToolResultPart("call_1", "accounts_get", {"id": 42, "status": "active"}),
                ToolResultPart("call_2", "accounts_get", "no such account", is_error=True),
            ),
        ),
    )

    await drain(deepseek(), ModelInput(messages, (ACCOUNTS,)))

    assert deepseek_server.bodies[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "First part.Second part."},
        {"role": "assistant", "content": "Earlier answer."},
        {"role": "user", "content": "Check 42."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "accounts_get", "arguments": '{"account_id": 42}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "accounts_get", "arguments": '{"account_id": 43}'},
                },
            ],
            "reasoning_content": "Need the account.",
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"id": 42, "status": "active"}'},
        # A failed call reads the same for every provider: {"error": ...}.
        {"role": "tool", "tool_call_id": "call_2", "content": '{"error": "no such account"}'},
    ]


async def test_reasoning_is_sent_back_only_for_turns_with_tool_calls(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(*_answer(wire))
    messages = (
        Message.user("Hello"),
        Message.assistant([ThinkingPart("Just greet."), TextPart("Hi!")]),
        Message.user("Status of 42?"),
        Message.assistant(
            [ThinkingPart("Look it up."), ToolCallPart("c1", "accounts_get", {"account_id": 42})]
        ),
        Message("tool", (ToolResultPart("c1", "accounts_get", {"status": "active"}),)),
        Message.assistant([ThinkingPart("It is active."), TextPart("Active.")]),
        Message.user("Thanks"),
    )

    await drain(deepseek(), ModelInput(messages, (ACCOUNTS,)))

    assistants = [m for m in deepseek_server.bodies[0]["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_content") for m in assistants] == [
        None,
        "Look it up.",
        "It is active.",
    ]


async def test_provider_state_restores_reasoning_a_caller_dropped(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    model = deepseek()
    deepseek_server.stream(
        wire.chunk(reasoning="I should call the tool."),
        wire.chunk(tool_calls=[wire.call_start(0, "call_7", "accounts_get", '{"account_id":42}')]),
        wire.chunk(finish_reason="tool_calls", usage=wire.usage()),
    )
    deepseek_server.stream(*_answer(wire, "Active."))
    first = await drain(model, ModelInput((Message.user("42?"),), (ACCOUNTS,)))

    # A direct gateway caller that keeps only the tool calls, not the thinking part, but
    # passes provider_state along as the contract asks.
    follow_up = (
        Message.user("42?"),
        Message.assistant([ToolCallPart("call_7", "accounts_get", {"account_id": 42})]),
        Message("tool", (ToolResultPart("call_7", "accounts_get", {"status": "active"}),)),
    )
    await drain(
        model, ModelInput(follow_up, (ACCOUNTS,), provider_state=first.result.provider_state)
    )

    sent = deepseek_server.bodies[1]["messages"][1]
    assert sent["reasoning_content"] == "I should call the tool."


async def test_compatible_options_pass_through(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(*_answer(wire))
    options = {
        "temperature": 0.3,
        "top_p": 0.9,
        "thinking": {"type": "enabled"},
        "reasoning_effort": "high",
        "user_id": "tenant-7",
    }

    await drain(deepseek(), ModelInput((Message.user("Hi"),), options=options))

    body = deepseek_server.bodies[0]
    assert {name: body[name] for name in options} == options


@pytest.mark.parametrize(
    "option",
    [
        "model",
        "messages",
        "tools",
        "tool_choice",
        "response_format",
        "parallel_tool_calls",
        "max_tokens",
        "stream",
    ],
)
async def test_fevex_owned_fields_cannot_be_replaced_by_options(
    deepseek: Any, deepseek_server: Any, drain: Any, option: str
) -> None:
    with pytest.raises(FevexRunError) as caught:
        await drain(deepseek(), ModelInput((Message.user("Hi"),), options={option: "x"}))

    assert caught.value.code == "PROVIDER_OPTION_NOT_ALLOWED"
    assert option in caught.value.message
    assert deepseek_server.requests == []


async def test_structured_output_is_refused_in_strict_mode_before_any_request(
    deepseek: Any, deepseek_server: Any, drain: Any
) -> None:
    with pytest.raises(FevexRunError) as caught:
        await drain(deepseek(), ModelInput((Message.user("Hi"),), output_schema=ANSWER_SCHEMA))

    assert caught.value.code == "PROVIDER_SCHEMA_UNSUPPORTED"
    assert 'schema_policy="best-effort"' in caught.value.message
    assert deepseek_server.requests == []


async def test_best_effort_structured_output_uses_json_mode_and_parses_the_answer(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(
        wire.chunk(reasoning="Answer in JSON."),
        wire.chunk(content='{"answer": "Acc'),
        wire.chunk(content='ount 42 is active."}'),
        wire.chunk(finish_reason="stop", usage=wire.usage()),
    )

    step = await drain(
        deepseek(schema_policy="best-effort"),
        ModelInput((Message.system("Be brief."), Message.user("42?")), output_schema=ANSWER_SCHEMA),
    )

    assert step.result.output == {"answer": "Account 42 is active."}
    assert "".join(step.deltas) == '{"answer": "Account 42 is active."}'
    body = deepseek_server.bodies[0]
    assert body["response_format"] == {"type": "json_object"}
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("Be brief.\n\n")
    assert "json" in system["content"]
    assert json.dumps(ANSWER_SCHEMA, separators=(",", ":")) in system["content"]


async def test_json_mode_adds_a_system_prompt_when_there_is_none(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(*_answer(wire, '{"answer": "yes"}'))

    await drain(
        deepseek(schema_policy="best-effort"),
        ModelInput((Message.user("42?"),), output_schema=ANSWER_SCHEMA),
    )

    first, second = deepseek_server.bodies[0]["messages"]
    assert first["role"] == "system"
    assert "json" in first["content"]
    assert second == {"role": "user", "content": "42?"}


async def test_blank_json_output_is_a_retryable_error(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(wire.chunk(content="\n\n  "), wire.chunk(finish_reason="stop"))

    with pytest.raises(FevexRunError) as caught:
        await drain(
            deepseek(schema_policy="best-effort"),
            ModelInput((Message.user("42?"),), output_schema=ANSWER_SCHEMA),
        )

    assert caught.value.code == "PROVIDER_EMPTY_OUTPUT"
    assert caught.value.recoverable


async def test_images_are_refused_before_any_request(
    deepseek: Any, deepseek_server: Any, drain: Any
) -> None:
    message = Message.user([TextPart("What is this?"), ImagePart("image/png", data="iVBORw0KGgo=")])

    with pytest.raises(FevexRunError) as caught:
        await drain(deepseek(), ModelInput((message,)))

    assert caught.value.code == "PROVIDER_INPUT_UNSUPPORTED"
    assert "image" in caught.value.message
    assert deepseek_server.requests == []


async def test_openai_settings_of_the_environment_never_reach_deepseek(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-acme")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-acme")
    monkeypatch.setenv(
        "OPENAI_CUSTOM_HEADERS", "Authorization: Bearer sk-openai-secret\nX-Team: payments"
    )
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    deepseek_server.stream(*_answer(wire))
    deepseek_server.stream(*_answer(wire))
    model = deepseek()

    await drain(model, ModelInput((Message.user("Hi"),)))
    await drain(model, ModelInput((Message.user("Account 42?"),), (ACCOUNTS,)))

    for request in deepseek_server.requests:
        assert request.headers["authorization"] == "Bearer sk-loopback-test-key"
        assert not {"openai-organization", "openai-project", "x-team"} & set(request.headers)
        assert "sk-openai-secret" not in repr(request.headers)
    assert [r.path for r in deepseek_server.requests] == [
        "/chat/completions",
        "/beta/chat/completions",
    ]
