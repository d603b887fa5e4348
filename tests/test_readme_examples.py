"""The python examples of README.md, packages/core/README.md and docs/ run as written (see
``tests/doc_examples.py``): each test gives its example what the text around it assumes,
runs it, and checks what the text says it does."""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import time_machine
from pydantic import BaseModel
from tests.doc_examples import ROOT, Documents, Example
from tests.doc_stand_ins import (
    TEST_API_KEY,
    DocsServer,
    LoopbackServer,
    ResponseEvents,
    served,
)

from fevex import (
    Fevex,
    FevexError,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_tool,
    define_workflow,
)
from fevex.cli import main as cli_main
from fevex.messages import ImagePart, ToolResultPart
from fevex.models import ModelInput, ModelResult, ToolCall, Usage
from fevex.plugins import register_plugin, reset_plugins
from fevex.policies import PolicyRequest
from fevex.runtime import ExecutionContext, InMemoryRunStore
from fevex.testing import FakeModel, FunctionModel

DOCUMENTS = Documents(
    ROOT / "README.md", ROOT / "packages" / "core" / "README.md", *sorted(ROOT.glob("docs/**/*.md"))
)


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    """OpenAI's stand-in on loopback (fevex-openai's tests' server), named by the
    environment as a deployment names OpenAI."""
    server = LoopbackServer()
    server.start()
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    yield server
    server.stop()


def test_every_python_block_is_an_example_a_test_runs_or_a_fragment_saying_why() -> None:
    assert DOCUMENTS.unaccounted() == []


def test_a_block_without_its_comment_or_its_test_is_unaccounted(tmp_path: Path) -> None:
    markdown = tmp_path / "guide.md"
    blocks = [
        "<!-- example: greeting -->\n```python\nprint('hi')\n```",
        "<!-- example: farewell -->\n```python\nprint('bye')\n```",
        "<!-- fragment: the middle of a function -->\n```python\nreturn 1\n```",
        "<!-- fragment: -->\n```python\nreturn 2\n```",
        "- a list item:\n\n  ```python\n  print('unmarked')\n  ```",
        "```bash\necho 'not python'\n```",
    ]
    markdown.write_text("\n\n".join(blocks) + "\n")
    documents = Documents(markdown)
    documents.example("greeting")

    assert documents.unaccounted() == [
        f"{markdown}:8: no test runs the example 'farewell'",
        f"{markdown}:18: a fragment must say why it cannot run",
        f"{markdown}:24: no <!-- example: ... --> or <!-- fragment: ... -->",
    ]


# -- Agents, tools, apps -------------------------------------------------------------------


@DOCUMENTS.example("first-agent")
def test_the_first_agent_answers(example: Example, capsys: pytest.CaptureFixture[str]) -> None:
    example.run()
    assert capsys.readouterr().out == "Account 42 is active.\n"


@DOCUMENTS.example("core-first-agent")
def test_the_core_readme_first_agent_answers(
    example: Example, capsys: pytest.CaptureFixture[str]
) -> None:
    example.run()
    assert capsys.readouterr().out == "Account 42 is active.\n"


def answering_model(answer: object) -> FakeModel:
    """The first agent's model again: asks for account 42, then answers."""
    return FakeModel(
        {"tool_calls": [{"id": "call-1", "name": "get_account", "input": {"account_id": 42}}]},
        {"output": answer},
    )


@DOCUMENTS.example("first-agent", "apps")
@pytest.mark.anyio
async def test_an_app_is_an_async_context_manager_with_typed_results(
    examples: list[Example], capsys: pytest.CaptureFixture[str]
) -> None:
    first_agent, apps = examples
    names = await anyio.to_thread.run_sync(first_agent.run)  # a script: it blocks
    capsys.readouterr()
    names["model"] = answering_model({"answer": "Account 42 is active."})
    await apps.run_async(**names)
    assert capsys.readouterr().out == "Account 42 is active.\n"


@DOCUMENTS.example("first-agent", "apps-blocking")
def test_a_script_uses_the_blocking_twins(examples: list[Example]) -> None:
    first_agent, blocking = examples
    names = first_agent.run()
    names["model"] = answering_model({"answer": "Account 7 is active."})
    names["support_agent"] = define_agent(
        name="support",
        instructions="Answer account questions clearly.",
        tools=[names["get_account"]],
        output_schema=names["Answer"],
    )
    names = blocking.run(**names)
    assert names["run"].agent_name == "support"
    # Leaving `with` closed the app: a run still going then was cancelled.
    assert names["app"].get_run_sync(names["run"].id).status in ("completed", "cancelled")


class Account(BaseModel):
    id: int
    status: str


@DOCUMENTS.example("tool-retry")
@pytest.mark.anyio
async def test_a_tool_retry_goes_back_to_the_model(example: Example) -> None:
    accounts = {42: Account(id=42, status="active")}
    names = example.run(define_tool=define_tool, Account=Account, accounts=accounts)
    model = FakeModel(
        {"tool_calls": [{"id": "c1", "name": "get_account", "input": {"account_id": 7}}]},
        {"tool_calls": [{"id": "c2", "name": "get_account", "input": {"account_id": "x"}}]},
        {"tool_calls": [{"id": "c3", "name": "get_account", "input": {"account_id": 42}}]},
        {"output": "Account 42 is active."},
    )
    agent = define_agent(name="support", instructions="Help.", tools=[names["get_account"]])
    result = await create_fevex(models={"default": model}, agents=[agent]).run_agent(agent, "42?")
    assert result.output == "Account 42 is active."
    retried = [e.payload for e in result.events if e.type == "tool.failed"]
    assert [(p["error"]["code"], p["retry"]) for p in retried] == [
        ("TOOL_FAILED", True),
        ("TOOL_INPUT_INVALID", True),
    ]
    assert retried[0]["error"]["message"] == "No account 7; ask the user for the ID."


@DOCUMENTS.example("tool-output-parts")
@pytest.mark.anyio
async def test_a_tool_output_carries_an_image_to_the_model(example: Example) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(8)
    names = example.run(define_tool=define_tool, draw=lambda metric: png)
    model = FakeModel(
        {"tool_calls": [{"id": "c1", "name": "chart", "input": {"metric": "sales"}}]},
        {"output": "Sales rise."},
    )
    agent = define_agent(name="analyst", instructions="Look.", tools=[names["chart"]])
    result = await create_fevex(models={"default": model}, agents=[agent]).run_agent(agent, "?")
    assert result.output == "Sales rise."
    (part,) = model.calls[1].messages[-1].content
    assert isinstance(part, ToolResultPart)
    assert part.output == {"metric": "sales"}
    assert part.content == (ImagePart("image/png", data=base64.b64encode(png).decode()),)
    (completed,) = [e.payload for e in result.events if e.type == "tool.completed"]
    assert completed["content"] == [{"type": "image", "media_type": "image/png", "bytes": 16}]


# -- Durable runs ---------------------------------------------------------------------------


class Charge(BaseModel):
    amount: int
    currency: str


class Receipt(BaseModel):
    charge_id: str


class Payments:
    """The payment service the example's tool calls, outside fevex."""

    def __init__(self) -> None:
        self.charges: list[tuple[Charge, str, str]] = []

    async def charge(self, request: Charge, *, api_key: str, idempotency_key: str) -> Receipt:
        self.charges.append((request, api_key, idempotency_key))
        return Receipt(charge_id=f"ch-{len(self.charges)}")


@DOCUMENTS.example("durable-runs")
@pytest.mark.anyio
async def test_a_durable_run_pauses_for_approval_and_resumes_with_the_credential(
    example: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAYMENTS_KEY", "pk-test-1234")
    payments = Payments()
    asked: list[PolicyRequest] = []
    charge_call = {"id": "c1", "name": "charge", "input": {"amount": 30, "currency": "EUR"}}
    model = FakeModel({"tool_calls": [charge_call]}, {"output": "Charged."})
    names = await example.run_async(
        Charge=Charge,
        Receipt=Receipt,
        payments=payments,
        models={"default": model},
        billing=define_agent(name="billing", instructions="Bill.", tools=["charge"]),
        deny_after_hours=asked.append,  # allows: returns None
    )
    run = await names["app"].get_run(names["run_id"])
    assert run.status == "completed"
    assert run.output == "Charged."
    ((request, api_key, key),) = payments.charges
    assert (request, api_key) == (Charge(amount=30, currency="EUR"), "pk-test-1234")
    assert key
    assert asked


# -- Workflows and teams --------------------------------------------------------------------


def says_its_instructions(model_input: ModelInput) -> str:
    """A model that answers with the first line its agent's instructions say."""
    return model_input.messages[0].text.splitlines()[0]


class Order(BaseModel):
    text: str


class Approved(BaseModel):
    approved: bool


@DOCUMENTS.example("workflows")
@pytest.mark.anyio
async def test_a_workflow_waits_for_its_event_then_sleeps_durably(example: Example) -> None:
    @define_tool
    def spellcheck(text: str) -> dict[str, int]:
        """Count the typos."""
        return {"typos": 0}

    mails: list[str] = []
    names = await example.run_async(
        Order=Order,
        Approved=Approved,
        models={"default": FunctionModel(says_its_instructions)},
        writer=define_agent(name="writer", instructions="Dear customer, ..."),
        spellcheck=spellcheck,
        send_mail=mails.append,
    )
    app = names["app"]
    run = await app.get_run(names["run_id"])
    # The approval arrived; the run now sleeps an hour, stored as its wake-up time.
    assert run.status == "paused"
    assert run.wake_at is not None
    assert 3500 < run.wake_at - time.time() <= 3600
    events = [event.type for event in await app.list_events(run.id)]
    assert events.count("workflow.event.received") == 1
    assert mails == []


@DOCUMENTS.example("parallel-steps")
@pytest.mark.anyio
async def test_parallel_branches_book_a_trip(example: Example) -> None:
    cancelled: list[object] = []

    @define_tool
    def book_flight(city: str) -> str:
        """Book a flight."""
        return f"flight to {city}"

    def book_hotel(city: str) -> str:
        return f"hotel in {city}"

    @define_workflow(name="trip")
    async def trip(step: WorkflowStep, trip: dict[str, str]) -> Any:
        names = await example.run_async(
            step=step,
            trip=trip,
            Any=Any,
            cancel_flight=cancelled.append,
            book_hotel=book_hotel,
            cancel_hotel=cancelled.append,
        )
        return names["booked"]

    app = create_fevex(models={"default": FakeModel()}, tools=[book_flight], workflows=[trip])
    result = await app.run_workflow(trip, {"city": "Lisbon"})
    assert result.output == {"flight": "flight to Lisbon", "hotel": "hotel in Lisbon"}
    assert cancelled == []


@DOCUMENTS.example("teams")
@pytest.mark.anyio
async def test_a_team_plans_works_in_parallel_and_hands_off_for_review(example: Example) -> None:
    members = {
        name: define_agent(name=name, instructions=f"{name} says so.")
        for name in ("planner", "researcher", "coder", "reviewer")
    }
    names = await example.run_async(
        models={"default": FunctionModel(says_its_instructions)}, **members
    )
    assert names["result"].output == "reviewer says so."
    delegated = [r.name for r in await names["app"].list_runs(parent_run_id=names["result"].run_id)]
    assert sorted(delegated) == ["coder", "planner", "researcher", "reviewer"]


# -- Observability, evaluations, cassettes --------------------------------------------------


@DOCUMENTS.example("observability")
@pytest.mark.anyio
async def test_observability_prices_each_model_step_and_reports_its_exports(
    example: Example,
) -> None:
    model = FakeModel({"output": "Hi!", "usage": {"input_tokens": 400, "output_tokens": 100}})
    support = define_agent(name="support", instructions="Greet.")
    names = await example.run_async(models={"default": model}, support=support)
    report = names["report"]
    assert report.spans >= 2  # the run's span and its model step's
    assert (report.failed_exports, report.dropped_spans) == (0, 0)
    (run,) = await names["app"].list_runs()
    (step,) = [e for e in await names["app"].list_events(run.id) if e.type == "model.completed"]
    assert step.payload["cost"] == {"amount": pytest.approx(500 * 0.000_001), "currency": "USD"}
    await names["app"].close()


def looks_up_account_42(model_input: ModelInput) -> ModelResult:
    usage = Usage(input_tokens=300, output_tokens=20)
    if model_input.messages[-1].role != "tool":
        call = ToolCall("c1", "accounts_get", {"account_id": 42})
        return ModelResult(tool_calls=[call], usage=usage)
    return ModelResult(output={"answer": "Account 42 is active."}, usage=usage)


@define_tool(name="accounts_get")
def accounts_get(account_id: int) -> dict[str, object]:
    """Get an account."""
    return {"id": account_id, "status": "active"}


class Answer(BaseModel):
    answer: str


@DOCUMENTS.example("evaluations")
@pytest.mark.anyio
async def test_an_evaluation_is_compared_with_main_s_baseline(
    example: Example,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    support = define_agent(
        name="support", instructions="Help.", tools=[accounts_get], output_schema=Answer
    )
    app = create_fevex(models={"default": FunctionModel(looks_up_account_42)}, agents=[support])
    # main's baseline: what this example wrote on main.
    await example.run_async(app=app, addresses={"main-baseline.json": "support-baseline.json"})
    shutil.copyfile("support-baseline.json", "main-baseline.json")
    capsys.readouterr()

    names = await example.run_async(app=app)

    ((case,),) = [names["report"].cases]
    assert (case.case_id, case.status) == ("active-account", "passed")
    assert case.tool_calls == ("accounts_get",)
    assert names["comparison"].regressions == ()
    assert "active-account" in capsys.readouterr().out


@DOCUMENTS.example("cassettes")
@pytest.mark.anyio
async def test_a_recorded_cassette_replays_without_the_model(
    example: Example, openai_server: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    openai_server.respond(ResponseEvents().message("Hello!").completed().scripted())
    support = define_agent(name="support", instructions="Greet.")

    names = await example.run_async(support=support)

    assert (tmp_path / "tests" / "cassettes" / "support.json").is_file()
    app = create_fevex(models={"default": names["model"]}, agents=[support])
    assert (await app.run_agent(support, "Hello")).output == "Hello!"
    assert len(openai_server.requests) == 1  # the replay asked nothing


# -- The HTTP protocol ----------------------------------------------------------------------


@dataclass
class User:
    id: str
    tenant: str
    suspended: bool = False


USERS = {"Bearer ...": User("ada", "acme"), "Bearer old": User("bob", "acme", suspended=True)}


def verify_token(authorization: str | None) -> User | None:
    return USERS.get(authorization or "")


def refunding_app(refunds: list[str]) -> Fevex:
    @define_tool(approval="required")
    def refund(order: int) -> str:
        """Refund an order."""
        refunds.append(f"order {order}")
        return "refunded"

    model = FakeModel(
        {"tool_calls": [{"id": "c1", "name": "refund", "input": {"order": 42}}]},
        {"output": "Order 42 is refunded."},
    )
    support = define_agent(name="support", instructions="Refund.", tools=[refund])
    return create_fevex(models={"default": model}, agents=[support])


@DOCUMENTS.example("http-authenticate")
@pytest.mark.anyio
async def test_the_http_app_authenticates_each_request(example: Example) -> None:
    names = await example.run_async(app=refunding_app([]), verify_token=verify_token)
    transport = httpx2.ASGITransport(app=names["http_app"])
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        answers = [
            (await http.get("/v1/runs", headers=headers)).status_code
            for headers in ({}, {"Authorization": "Bearer old"}, {"Authorization": "Bearer ..."})
        ]
    assert answers == [401, 403, 200]


@DOCUMENTS.example("http-authenticate", "http-client")
def test_the_http_client_observes_a_run_and_approves_its_call(examples: list[Example]) -> None:
    authenticate, client = examples
    refunds: list[str] = []
    names = authenticate.run(app=refunding_app(refunds), verify_token=verify_token)
    with served(names["http_app"]) as url:
        names = client.run(addresses={"https://agents.example.com": url})
        with names["FevexClient"](url, headers={"Authorization": "Bearer ..."}) as http:
            run = http.get_run(names["run"].id)
    assert (run.status, run.output) == ("completed", "Order 42 is refunded.")
    assert refunds == ["order 42"]


# -- Knowledge, records, kits ---------------------------------------------------------------


@DOCUMENTS.example("knowledge")
def test_skills_and_context_reach_the_model_as_instructions_and_as_data(
    example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    model = FunctionModel(lambda model_input: "Yes, within 30 days.")

    names = example.run(models={"default": model})

    ((model_input,),) = [model.calls]
    texts = [(message.role, message.text) for message in model_input.messages]
    assert ("system", "Refunds are allowed for 30 days.") in texts
    (account,) = [text for _, text in texts if "context provider 'account'" in text]
    assert "Plan: pro" in account
    names["app"].close_sync()


@DOCUMENTS.example("records")
@pytest.mark.anyio
async def test_a_record_is_written_by_compare_and_swap(example: Example) -> None:
    app = create_fevex(models={"default": FakeModel()})
    names = await example.run_async(app=app)
    assert (names["revision"], names["written"]) == (0, True)
    stored = await app.record_store.read("acme", "family-1")
    assert stored is not None
    assert (stored.revision, stored.value) == (1, {"active_id": "v2"})


def last_user_text_upper(model_input: ModelInput) -> str:
    return model_input.messages[-1].text.upper()


@DOCUMENTS.example("children")
@pytest.mark.anyio
async def test_child_runs_are_committed_in_order_once_all_are_accepted(example: Example) -> None:
    saved: list[str] = []

    def non_empty(value: object, id: str) -> None:
        if not value:
            raise ValueError(f"{id} is empty")

    names = await example.run_async(
        non_empty=non_empty, save_part=lambda value, id: saved.append(f"{id}={value}")
    )
    analyst = define_agent(name="analyst", instructions="Shout.")
    app = create_fevex(
        models={"default": FunctionModel(last_user_text_upper)},
        agents=[analyst],
        workflows=[names["analyze"]],
    )
    result = await app.run_workflow("analyze", ["red", "green", "blue"])
    assert result.output == ["RED", "GREEN", "BLUE"]
    assert saved == ["part-0=RED", "part-1=GREEN", "part-2=BLUE"]


class ReviewState(BaseModel):
    text: str
    summary: str | None = None
    receipt: str | None = None


@DOCUMENTS.example("tasks")
@pytest.mark.anyio
async def test_a_durable_task_analyzes_with_the_agent_s_output_then_publishes(
    example: Example,
) -> None:
    published: list[str] = []

    def publish(state: ReviewState, ctx: object) -> ReviewState:
        published.append(str(state.summary))
        return state.model_copy(update={"receipt": f"r-{len(published)}"})

    def may_review(context: ExecutionContext, state: ReviewState) -> None:
        if (context.actor or {}).get("id") != "ana":
            raise PermissionError("only ana reviews")

    names = await example.run_async(
        ReviewState=ReviewState,
        may_review=may_review,
        publish=publish,
        find_receipt=lambda state, ctx: None,
        models={"default": FunctionModel(lambda model_input: "Looks good.")},
        analyst=define_agent(name="analyst", instructions="Summarize the draft."),
    )
    # ctx.run_agent gave the step the agent's text, which the state keeps.
    assert names["result"].output == ReviewState(
        text="Draft 3", summary="Looks good.", receipt="r-1"
    )
    assert published == ["Looks good."]


class ScriptedReflector(LoopbackServer):
    """OpenAI's stand-in, answering each request from the tool results it carries, as
    ``examples/kit_reflection.py``'s reflector does: discover, read the failed run, submit
    a report citing its evidence."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        if scope["type"] == "http":
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            self.respond(self.answer(json.loads(body)["input"][-1]))
        sent = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive_again() -> Any:
            return sent.pop() if sent else await receive()

        await super().__call__(scope, receive_again, send)

    def answer(self, last: dict[str, Any]) -> Any:
        if last.get("type") != "function_call_output":
            return self.query("q1", {"action": "discover"})
        seen = json.loads(last["output"])
        if "accepted" in seen:
            return ResponseEvents().message("Reported.").completed().scripted()
        items = seen["items"]
        if items[0]["type"] == "run":
            failed = next(item for item in items if item["status"] == "failed")
            return self.query("q2", {"action": "read", "run_id": failed["run_id"]})
        cited = [item["evidence_id"] for item in items if item.get("error_code")]
        report = {"observed": [{"statement": "The refund failed on its tool.", "evidence": cited}]}
        return self.query("q3", {"action": "submit", "report": report})

    @staticmethod
    def query(call_id: str, arguments: dict[str, Any]) -> Any:
        call = json.dumps(arguments)
        return ResponseEvents().function_call(call_id, "history_query", call).completed().scripted()


@define_tool(name="refund")
def failing_refund(payment: str) -> str:
    """Refund a payment."""
    raise RuntimeError("the processor refused the card")


@DOCUMENTS.example("reflection")
@pytest.mark.anyio
async def test_a_reflection_cites_the_history_it_read(
    example: Example,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The deployment's store, with yesterday's failed refund in it.
    monkeypatch.setenv("FEVEX_RUN_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    refund_call = {"id": "c1", "name": "refund", "input": {"payment": "p-7"}}
    refunding = FakeModel({"tool_calls": [refund_call]})
    shop = ExecutionContext(actor={"id": "sam", "type": "user"}, namespace="shop")
    support = define_agent(name="support", instructions="Refund.", tools=[failing_refund])
    async with create_fevex(models={"default": refunding}, agents=[support]) as history:
        with pytest.raises(FevexError):
            await history.run_agent(support, "Refund p-7.", context=shop)
    server = ScriptedReflector()
    server.start()
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)

    def may(query: object, context: ExecutionContext) -> None:
        assert (context.actor or {}).get("type") == "auditor"

    try:
        names = await example.run_async(
            support=define_agent(name="support", instructions="Refund.", model="openai:gpt-5-mini"),
            may_read=may,
            may_ask=may,
        )
        await names["app"].close()
        await names["reflector"].aclose()  # the app closes only the models it built
    finally:
        server.stop()
    (finding,) = names["report"].observed
    assert capsys.readouterr().out == f"{finding.statement} {finding.evidence}\n"
    assert finding.evidence


class Goal(BaseModel):
    goal: str
    source_revision: str


def noted(model_input: ModelInput) -> str:
    said = [message.text for message in model_input.messages if message.role == "user"]
    return "noted: " + " / ".join(said)


@DOCUMENTS.example("family")
@pytest.mark.anyio
async def test_a_family_version_is_promoted_forked_and_restored(example: Example) -> None:
    ana = ExecutionContext(actor={"id": "ana", "type": "user"}, namespace="shop")
    support = define_agent(name="support", instructions="Answer briefly.")
    # Family versions carry checkpoints, which an app signs and verifies with its key.
    app = create_fevex(
        models={"default": FunctionModel(noted)},
        agents=[support],
        checkpoint_key=secrets.token_urlsafe(32),
    )
    first = await app.run_agent(support, "Refunds take five days.", context=ana)
    changes: list[str] = []

    names = await example.run_async(
        app=app,
        run_id=first.run_id,
        ctx=ana,
        Goal=Goal,
        may_change=lambda operation, family, context: changes.append(operation["action"]),
        source_is_current=lambda version: None,
        three_way=lambda base, target, source: None,
    )

    assert names["active"].active_id == names["made"].newest.id
    assert names["branch"].newest.parent_ids == (names["made"].newest.id,)
    assert names["result"].output == "noted: Refunds take five days. / And for store credit?"
    assert changes == ["create", "promote", "fork"]


@DOCUMENTS.example("publication")
@pytest.mark.anyio
async def test_publication_gives_the_agent_what_the_editor_published_whenever_it_runs(
    example: Example,
) -> None:
    def editors_publish(action: str, request: object, context: ExecutionContext) -> None:
        if action in {"publish", "reject"} and (context.actor or {}).get("type") != "editor":
            raise PermissionError(f"only editors {action}")

    model = FunctionModel(lambda model_input: model_input.messages[-2].text)
    # A year from now the example still publishes: its dates are computed when it runs.
    with time_machine.travel(datetime.now(UTC) + timedelta(days=365), tick=True):
        names = await example.run_async(
            may=editors_publish,
            sources_current=lambda sources, context: None,
            models={"default": model},
            editor=ExecutionContext(actor={"id": "ana", "type": "editor"}, namespace="shop"),
        )
        reader = ExecutionContext(actor={"id": "sam", "type": "user"}, namespace="shop")
        result = await names["app"].run_agent("support", "Refunds?", context=reader)
    assert names["receipt"].published_revision == 1
    assert "30 days." in result.output


# -- Connections, plugins, testing ----------------------------------------------------------


@DOCUMENTS.example("connections")
@pytest.mark.anyio
async def test_a_connection_offers_the_allowed_remote_tool_under_its_own_name(
    example: Example,
) -> None:
    model = FakeModel(
        {"tool_calls": [{"id": "c1", "name": "docs__search", "input": {"query": "lease"}}]},
        {"output": "See the Leases page."},
    )
    docs = DocsServer()
    with docs.running() as url:
        names = await example.run_async(
            models={"default": model}, addresses={"https://docs.example.com/mcp": url}
        )
        result = await names["app"].run_agent("assistant", "What is a lease?")
        await names["app"].close()
        await names["docs"].provider.aclose()
    assert result.output == "See the Leases page."
    assert docs.queries == ["lease"]
    (offered,) = model.calls[0].tools
    assert (offered.name, offered.description) == ("docs__search", "Search the product docs.")


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Plugins discovered from the installed entry points, and forgotten afterwards."""
    for name in ("FEVEX_PLUGINS", "FEVEX_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(name, raising=False)
    reset_plugins()
    yield
    reset_plugins()


def as_plugin(names: dict[str, Any]) -> types.ModuleType:
    """An example's namespace as the plugin module it would be."""
    module = types.ModuleType("acme_plugin")
    module.__dict__.update(names)
    return module


@DOCUMENTS.example("plugin-hooks")
def test_a_plugin_registers_a_model_provider_and_a_store_scheme(
    example: Example, fresh_plugins: None
) -> None:
    built: list[tuple[str, dict[str, Any]]] = []

    def create_acme_model(model_name: str, **options: Any) -> FakeModel:
        built.append((model_name, options))
        return FakeModel({"output": "Hello from acme."})

    store = InMemoryRunStore()
    names = example.run(
        create_acme_model=create_acme_model, open_acme_store=lambda url, **options: store
    )
    register_plugin(as_plugin(names), name="acme")

    app = create_fevex(
        agents=[define_agent(name="a", instructions="Greet.", model="acme:tiny")],
        run_store="acme://runs",
    )
    result = app.run_agent_sync("a", "Hi")
    assert result.output == "Hello from acme."
    assert built == [("tiny", {})]
    assert app.get_run_sync(result.run_id).status == "completed"
    app.close_sync()


@DOCUMENTS.example("plugin-command")
def test_a_plugin_adds_a_command_to_the_cli(
    example: Example, fresh_plugins: None, capsys: pytest.CaptureFixture[str]
) -> None:
    register_plugin(as_plugin(example.run()), name="acme")
    assert cli_main(["hello", "--who", "ada"]) == 0
    assert capsys.readouterr().out == "hello ada\n"


@DOCUMENTS.example("testing-fixtures")
def test_the_fixtures_example_passes_and_fails_when_the_model_says_otherwise(
    example: Example, tmp_path: Path
) -> None:
    otherwise = example.code.replace('respond({"output": "Hello!"})', 'respond({"output": "Bye."})')
    assert otherwise != example.code
    (tmp_path / "test_support.py").write_text(example.code)
    (tmp_path / "test_otherwise.py").write_text(otherwise)
    # The README's reader has fevex's pytest plugin, not this workspace's heavy ones.
    quiet = ["-p", "no:cacheprovider", "-p", "no:schemathesis", "-p", "no:hypothesispytest"]
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-W", "error", *quiet],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    outcomes = sorted(
        line.split(" ")[:2]
        for line in completed.stdout.splitlines()
        if line.startswith(("PASSED ", "FAILED ", "ERROR "))
    )
    assert outcomes == [
        ["FAILED", "test_otherwise.py::test_support_answers[asyncio]"],
        ["FAILED", "test_otherwise.py::test_support_answers_in_a_plain_test"],
        ["PASSED", "test_support.py::test_support_answers[asyncio]"],
        ["PASSED", "test_support.py::test_support_answers_in_a_plain_test"],
    ], completed.stdout
