"""The program of the stored runs in this folder: a workflow whose steps are journalled with
inputs of every JSON shape a digest must keep apart (text beyond ASCII, floats, integers past
64 bits, nested objects written in another key order), then paused waiting for an event.

``make_fixtures.py`` ran it with the code of its day and kept the paused run; the tests run it
again, unchanged, with today's code, and continue the stored run. If a journal digest changed,
the replay of the first step would fail with ``STEP_MISMATCH``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fevex import Fevex, WorkflowStep, create_fevex, define_tool, define_workflow

WORKFLOW = "journalled"
EVENT = "go"
RUN_INPUT = {"name": "Zoë ☃ 中文", "count": 2**53 + 1, "tags": ["a", "ß"]}
EXPECTED_OUTPUT = {"steps": 9, "payload": {"note": "naïve"}}

UNICODE = 'naïve café ☃ 𝄞 中文 \u2028 "quoted" \\ back\tslash'
NUMBERS = [0.1, 1e-7, 1e300, -0.0, 3.0, 2.5e-308, 2**70, -(2**63), 0, -1]
NESTED = {"z": {"y": [1, {"b": 2, "a": 1}], "x": {}}, "a": None, "é": True, "A": [[]]}


class Go(BaseModel):
    note: str


def keep(*values: Any) -> int:
    """A step's effect: nothing but counting what it was given."""
    return len(values)


@define_tool(name="keep_values", description="Keep values.", idempotency="keyed")
def keep_values(values: dict[str, Any]) -> dict[str, int]:
    return {"kept": len(values)}


@define_workflow(name=WORKFLOW, version="1", events={EVENT: Go})
async def journalled(step: WorkflowStep, input: Any) -> dict[str, Any]:
    done = 0
    done += await step.run("unicode", keep, UNICODE, "Ω≈ç√∫˜µ≤≥÷", "")  # noqa: RUF001
    done += await step.run("numbers", keep, NUMBERS)
    done += await step.run("nested", keep, NESTED, [NESTED, NESTED])
    done += await step.run("from-input", keep, input)
    found = await step.tool("tool", keep_values, {"values": {"ключ": 1.5, "b": [2**64], "a": ""}})
    done += found["kept"]
    delivery = await step.wait_for_event("wait", EVENT)
    payload = delivery.payload
    assert isinstance(payload, Go)
    done += await step.run("after", keep, payload.note)
    return {"steps": done, "payload": payload.model_dump()}


def build_app(run_store: Any) -> Fevex:
    return create_fevex(tools=[keep_values], workflows=[journalled], run_store=run_store)
