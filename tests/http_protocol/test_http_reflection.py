"""A reflection's run over HTTP: served by ``fevex serve`` from the store it was written
to, listed with its kind and name to a caller of its namespace, and to no other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fevex import create_fevex
from fevex.http import FevexClient
from fevex.kits.reflection import define_reflection, run_history_source
from fevex.models import ModelInput, ModelResult, ToolCall
from fevex.runtime import ExecutionContext
from fevex.testing import FunctionModel

GUARD = 60.0
ANA = ExecutionContext(actor={"id": "ana", "type": "user"}, namespace="acme")
# Defined as reflection_service.py defines it: the served app registers the same agent.
reflection = define_reflection(
    model="reflector",
    source=run_history_source(authorize=lambda *_: None),
    authorize=lambda *_: None,
)


def _reflector(model_input: ModelInput) -> ModelResult | str:
    if model_input.messages[-1].role == "tool":
        return "No runs to speak of."
    return ModelResult(tool_calls=[ToolCall("q1", "history_query", {"action": "discover"})])


def test_a_reflection_run_is_listed_over_http_in_its_namespace(tmp_path: Path, serve: Any) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    with create_fevex(
        models={"reflector": FunctionModel(_reflector)},
        agents=[reflection.agent],
        run_store=store,
    ) as app:
        report = reflection.run_sync(app, "What ran?", context=ANA)
    assert report.coverage.pages == 1

    server = serve(store, app="reflection_service:http_app").start()
    with FevexClient(server.url, headers={"authorization": "Bearer ana"}, timeout=GUARD) as ana:
        runs = ana.list_runs(name="reflection").runs
    with FevexClient(server.url, headers={"authorization": "Bearer olga"}, timeout=GUARD) as olga:
        hidden = olga.list_runs(name="reflection").runs

    assert [(run.id, run.kind, run.status) for run in runs] == [
        (report.run_id, "agent", "completed")
    ]
    assert hidden == ()
