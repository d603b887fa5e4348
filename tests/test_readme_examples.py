"""The python examples of README.md, packages/core/README.md and docs/ run as written (see
``tests/doc_examples.py``): each test gives its example what the text around it assumes,
runs it, and checks what the text says it does."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from pydantic import BaseModel

from fevex import Fevex, WorkflowStep, create_fevex, define_agent, define_tool, define_workflow
from fevex.models import ModelInput, ModelResult, ToolCall, Usage
from fevex.policies import PolicyRequest
from fevex.testing import FakeModel, FunctionModel
from tests.doc_examples import ROOT, Documents, Example

sys.path.insert(0, str(ROOT / "packages" / "openai" / "tests"))

from openai_loopback import TEST_API_KEY, LoopbackServer, ResponseEvents

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


@DOCUMENTS.example("first-agent", "apps", "apps-blocking")
def test_a_script_uses_the_blocking_twins(examples: list[Example]) -> None:
    first_agent, apps, blocking = examples
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
    names = example.run(define_tool=define_tool, Account=Account, accounts={42: Account(id=42, status="active")})
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
    Path("main-baseline.json").write_bytes(Path("support-baseline.json").read_bytes())
    capsys.readouterr()

    names = await example.run_async(app=app)

    ((case,),) = [names["report"].cases]
    assert (case.case_id, case.status, case.tool_calls) == ("active-account", "passed", ("accounts_get",))
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


@contextlib.contextmanager
def served(asgi_app: Any) -> Iterator[str]:
    """``asgi_app`` served by uvicorn on loopback in a thread; yields its URL."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    config = uvicorn.Config(asgi_app, log_level="warning", lifespan="off", ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{listening.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listening.close()


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
