"""The answer of ``GET /v1/runs/{run_id}/view``: a run as the console draws it, computed in
the server so that the browser never re-implements a projection.

- ``stream``, ``state``, ``messages`` and ``turn``: :func:`fevex.events.project_run` of
  the run's events, as JSON;
- ``spans``: the spans fevex builds for the run and its descendants (the same
  :class:`~fevex._internal.tracing.span_builder.SpanBuilder` a trace exporter is fed by,
  replayed over their committed events), metadata only whatever the app's content policy
  is, each with the run and event it came from; spans still open are drawn up to now and
  say ``open``;
- ``totals``: the tokens and cost of the run's model steps and its descendants', each
  step counted once (from its ``model.completed``), and how many runs the tree holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from fevex._internal.tracing.span_builder import SpanBuilder, trace_id_of
from fevex.app import Fevex
from fevex.events import Cost, RunEvent, RunView, Turn, project_run
from fevex.events.cost import total_cost
from fevex.messages import Message
from fevex.models import Usage
from fevex.observability import ContentPolicy, Span
from fevex.runtime.records import AgentRun

__all__ = ["run_view_json"]

# A tree is read breadth first, at most this many runs (a page of children each).
MAX_TREE_RUNS = 1000


async def run_view_json(
    fevex: Fevex, run: AgentRun, visible: Callable[[AgentRun], bool]
) -> dict[str, Any]:
    """The view of ``run`` (see the module's description); a descendant ``visible`` refuses
    is left out with its own descendants, as if it did not exist."""
    tree = await _tree(fevex, run, visible)
    builder = SpanBuilder(ContentPolicy(), None)
    spans: list[dict[str, Any]] = []
    usage = Usage()
    costs: list[Cost | None] = []
    view: RunView | None = None
    for member in tree:
        events = await fevex.list_events(member.id)
        if member.id == run.id:
            view = project_run(events)
        for event in events:
            spans.extend(_span_json(s, member.id, event) for s in builder.add(member, event))
            if event.type == "model.completed":
                usage = usage + Usage.from_json(event.payload.get("usage"))
                costs.append(Cost.from_json(event.payload.get("cost")))
    now = time.time_ns()
    spans.extend({**_span_json(s, None, None), "open": True} for s in builder.open_spans(now))
    assert view is not None
    cost = total_cost(costs)
    return {
        "run_id": run.id,
        "stream": [_stream_json(item) for item in view.stream],
        "state": [asdict(transition) for transition in view.state],
        "messages": [message.to_json() for message in view.messages],
        "turn": None if view.turn is None else _turn_json(view.turn),
        "trace_id": trace_id_of(run.root_run_id),
        "spans": spans,
        "totals": {
            "runs": len(tree),
            "usage": usage.to_json(),
            "cost": None if cost is None else cost.to_json(),
        },
    }


async def _tree(fevex: Fevex, run: AgentRun, visible: Callable[[AgentRun], bool]) -> list[AgentRun]:
    """``run`` and its descendants, parents before their children, oldest child first."""
    tree = [run]
    position = 0
    while position < len(tree) and len(tree) < MAX_TREE_RUNS:
        parent = tree[position]
        position += 1
        children = await fevex.list_runs(parent_run_id=parent.id, limit=MAX_TREE_RUNS)
        shown = [child for child in reversed(children) if visible(child)]
        tree.extend(shown[: MAX_TREE_RUNS - len(tree)])
    return tree


def _stream_json(item: Any) -> dict[str, Any]:
    data = asdict(item)
    if hasattr(item, "call"):
        data["call"] = item.call.to_json()
    if hasattr(item, "result"):
        data["result"] = item.result.to_json()
    return data


def _message_json(message: Message | None) -> dict[str, Any] | None:
    return None if message is None else message.to_json()


def _turn_json(turn: Turn) -> dict[str, Any]:
    return {
        "run_id": turn.run_id,
        "status": turn.status,
        "request": turn.request.to_json(),
        "response": _message_json(turn.response),
        "started_at": turn.started_at,
        "ended_at": turn.ended_at,
        "duration_ms": turn.duration_ms,
        "usage": turn.usage.to_json(),
        "cost": None if turn.cost is None else turn.cost.to_json(),
        "steps": turn.steps,
        "tool_calls": turn.tool_calls,
        "error": turn.error,
    }


def _span_json(span: Span, run_id: str | None, event: RunEvent | None) -> dict[str, Any]:
    """A span as the browser reads it: milliseconds since the epoch (nanoseconds do not fit
    a JavaScript number), and the run and event (by sequence) that ended it."""
    return {
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "name": span.name,
        "kind": span.kind,
        "start_ms": span.start_ns / 1e6,
        "end_ms": span.end_ns / 1e6,
        "status": span.status,
        "error_code": span.error_code,
        "attributes": dict(span.attributes),
        "events": [_event_json(e.name, e.time_ns, e.attributes) for e in span.events],
        "run_id": run_id if run_id is not None else span.attributes.get("fevex.run.id"),
        "sequence": None if event is None else event.sequence,
        "open": False,
    }


def _event_json(name: str, time_ns: int, attributes: Any) -> dict[str, Any]:
    return {"name": name, "at_ms": time_ns / 1e6, "attributes": dict(attributes)}
