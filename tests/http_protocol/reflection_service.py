"""The app ``test_http_reflection.py`` serves: a reflection's agent registered like any, so
that its runs are listed over HTTP with their kind, within the caller's namespace."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from fevex import create_fevex
from fevex.http import create_http_app
from fevex.kits.reflection import define_reflection, run_history_source
from fevex.runtime import ExecutionContext
from fevex.testing import FunctionModel

CALLERS = {
    "ana": ExecutionContext(actor={"id": "ana", "type": "user"}, namespace="acme"),
    "olga": ExecutionContext(actor={"id": "olga", "type": "user"}, namespace="other"),
}


def _allow(*_: Any) -> None:
    return None


reflection = define_reflection(
    model="reflector", source=run_history_source(authorize=_allow), authorize=_allow
)


def authenticate(request: Request) -> ExecutionContext | None:
    return CALLERS.get(request.headers.get("authorization", "").removeprefix("Bearer "))


def http_app() -> Any:
    app = create_fevex(
        models={"reflector": FunctionModel(lambda model_input: "Nothing to add.")},
        agents=[reflection.agent],
    )
    return create_http_app(app, authenticate=authenticate)
