"""A run's checkpoint as an application may keep it: plain JSON that names what it needs
(the agent, its model, the tools the conversation called) and holds nothing that belongs
to the run that wrote it.

An exported checkpoint carries the run's own transcript and, for a run paused on an
approval, the tool calls of its current step with the results they already have. It
never carries the run's context (its actor and namespace), approval decisions (who
approved), credentials, leases, limits granted for the run, usage or cost: a run
restored from it is a new run, under the restoring caller's context and the app's
current definitions, and asks again for any approval its pending calls need.

The unfinished step of a run that failed or was cancelled in the middle of its tool
calls is left out (its assistant message and the calls' partial results): a restored run
never repeats an effect whose outcome its first run never recorded.

Whoever hands an app a checkpoint could make it call its tools, so restoring one trusts
little of it. An app with a checkpoint key signs its exports
(:mod:`fevex._internal.agents.checkpoint_signature`), and a restore refuses a checkpoint
that is unsigned or altered unless its caller says ``trusted=True``. Whatever its
signature, the conversation must be one an agent run could have had: no ``system``
message (an agent's instructions are added at each step, never kept in its transcript),
each tool call id once, and the pending calls exactly the tool calls of its last assistant
message; those calls then go through the app's policies and approvals as any model's
calls do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fevex._internal.agents.checkpoint_signature import (
    SIGNATURE_FIELD,
    CheckpointSigner,
    unverifiable,
)
from fevex._internal.agents.run_state import PendingCalls, RunState
from fevex._internal.composition.registry import DEFAULT_MODEL_KEY, Composition, PreparedAgent
from fevex.errors import FevexRunError
from fevex.messages import Message, ToolCallPart, message_from_json
from fevex.runtime.records import AgentRun

__all__ = [
    "RestoredConversation",
    "export_agent_checkpoint",
    "restored_conversation",
]

PORTABLE_FORMAT = "fevex.checkpoint"
_PORTABLE_VERSION = 1
_TERMINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class RestoredConversation:
    """What a restored agent run starts from: the exported transcript, the pending calls
    of a paused one (no decisions), and the run that was exported."""

    agent: str
    transcript: tuple[Message, ...]
    pending: PendingCalls | None
    source_run_id: str | None


def export_agent_checkpoint(
    run: AgentRun, stored: Any, prepared: PreparedAgent | None
) -> dict[str, Any]:
    """The portable checkpoint of the paused or terminal agent ``run`` whose stored
    checkpoint is ``stored`` (``prepared``: its agent, when the app still has it);
    ``CHECKPOINT_NOT_EXPORTABLE`` for any other run."""
    if run.kind != "agent":
        raise _not_exportable(run, "kind", f"it is a {run.kind} run; only agent runs export")
    if run.status != "paused" and run.status not in _TERMINAL:
        raise _not_exportable(run, "status", f"it is {run.status}; it must pause or end first")
    state = RunState.from_checkpoint(run.id, stored)
    transcript = list(state.transcript_json)
    pending: dict[str, Any] | None = None
    step = state.pending
    if step is not None:
        if run.status == "paused":
            whole = step.to_json()
            pending = {key: whole[key] for key in ("step", "calls", "results")}
        elif len(step.results) == len(step.calls):
            # The step's results join the transcript on the run's next model step, whose
            # checkpoint is only written if it calls tools again.
            transcript.append(Message("tool", tuple(step.results)).to_json())
        elif transcript and transcript[-1].get("role") == "assistant":
            transcript.pop()
    if run.status == "completed":
        # The answer joins the conversation at the final commit, which writes no checkpoint.
        transcript.append(Message.assistant(_answer_text(run.output)).to_json())
    messages = [message_from_json(item) for item in transcript]
    kept = None if pending is None else step
    return {
        "format": PORTABLE_FORMAT,
        "version": _PORTABLE_VERSION,
        "kind": "agent",
        "agent": run.agent_name,
        "model": None if prepared is None else model_of(prepared),
        "tools": tools_named(messages, kept),
        "status": run.status,
        "source_run_id": run.id,
        "transcript": transcript,
        "pending": pending,
        "output": run.output if run.status == "completed" else None,
    }


def _answer_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return json.dumps(output, ensure_ascii=False, separators=(",", ":"))


def model_of(prepared: PreparedAgent) -> str:
    """The model reference an agent's runs name in their exported checkpoints."""
    return prepared.definition.model or DEFAULT_MODEL_KEY


def tools_named(transcript: list[Message], pending: PendingCalls | None) -> list[str]:
    """Every tool a conversation called, in the order it first called them."""
    names = [
        part.name
        for message in transcript
        for part in message.content
        if isinstance(part, ToolCallPart)
    ]
    if pending is not None:
        names.extend(call.name for call in pending.calls)
    return list(dict.fromkeys(names))


def restored_conversation(
    composition: Composition,
    checkpoint: Any,
    signer: CheckpointSigner | None,
    *,
    trusted: bool,
) -> RestoredConversation:
    """The conversation a portable checkpoint holds, checked against the app:
    ``CHECKPOINT_UNSUPPORTED`` when it is not one; unless ``trusted``,
    ``CHECKPOINT_UNSIGNED``, ``CHECKPOINT_KEY_MISSING`` or ``CHECKPOINT_SIGNATURE_INVALID``
    when ``signer`` cannot vouch for it; ``CHECKPOINT_TRANSCRIPT_INVALID`` for a
    conversation no agent run has; ``CHECKPOINT_DEPENDENCY_MISSING`` when it names an
    agent, a model or a tool the app does not have (all of them listed)."""
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != PORTABLE_FORMAT:
        raise _unsupported("it is not a checkpoint export_checkpoint returned", "malformed")
    version = checkpoint.get("version")
    # A bool is an int to Python, and 1.0 equals 1: neither is a version.
    if type(version) is not int or version != _PORTABLE_VERSION:
        newer = type(version) is int and version > _PORTABLE_VERSION
        reason = "version" if newer else "malformed"
        raise _unsupported(f"its version {version!r} is not {_PORTABLE_VERSION}", reason)
    if not trusted:
        if SIGNATURE_FIELD not in checkpoint:
            raise unverifiable("unsigned")
        if signer is None:
            raise unverifiable("no_key")
        signer.verify(checkpoint)
    try:
        agent = checkpoint["agent"]
        if not isinstance(agent, str) or checkpoint.get("kind") != "agent":
            raise ValueError("an agent checkpoint names its agent")
        transcript = [message_from_json(item) for item in checkpoint["transcript"]]
        pending_json = checkpoint.get("pending")
        pending = None
        if pending_json is not None:
            pending = PendingCalls.from_json(
                {key: pending_json[key] for key in ("step", "calls", "results")}
            )
        model = checkpoint.get("model")
        if model is not None and not isinstance(model, str):
            raise ValueError("the model is a reference")
        source = checkpoint.get("source_run_id")
    except Exception as error:
        raise _unsupported(f"it cannot be read ({type(error).__name__})", "malformed") from None
    _check_conversation(transcript, pending)
    _check_dependencies(composition, agent, model, tools_named(transcript, pending))
    return RestoredConversation(
        agent, tuple(transcript), pending, source if isinstance(source, str) else None
    )


def _check_conversation(transcript: list[Message], pending: PendingCalls | None) -> None:
    """Refuse a conversation no agent run has had: one with a ``system`` message, a tool
    call id used twice, or pending calls that are not what its last assistant message asked
    for, answered in order (``CHECKPOINT_TRANSCRIPT_INVALID``)."""
    for index, message in enumerate(transcript):
        if message.role == "system":
            raise _transcript_invalid(
                "system_message",
                f"message {index} is a system message, which no agent run keeps in its "
                "transcript (the agent's instructions are added at each step)",
                index=index,
            )
    call_ids = [
        part.id
        for message in transcript
        for part in message.content
        if isinstance(part, ToolCallPart)
    ]
    if len(set(call_ids)) != len(call_ids):
        raise _transcript_invalid("duplicate_call_id", "it uses a tool call id twice")
    if pending is None:
        return
    last = transcript[-1] if transcript else None
    asked = []
    if last is not None and last.role == "assistant":
        asked = [
            (part.id, part.name, part.input)
            for part in last.content
            if isinstance(part, ToolCallPart)
        ]
    calls = pending.calls
    answered = [(result.id, result.name) for result in pending.results]
    if (
        asked != [(call.id, call.name, call.input) for call in calls]
        or len(answered) >= len(calls)
        or answered != [(call.id, call.name) for call in calls[: len(answered)]]
    ):
        raise _transcript_invalid(
            "pending_calls",
            "its pending tool calls are not the calls its last assistant message asked "
            "for, with results for the first of them only",
        )


def _check_dependencies(
    composition: Composition, agent: str, model: str | None, tools: list[str]
) -> None:
    missing: dict[str, Any] = {}
    prepared = composition.agents.get(agent)
    if prepared is None:
        missing["agent"] = agent
    else:
        models = {model_of(each) for each in composition.agents.values()}
        if model is not None and model not in models:
            missing["model"] = model
        offered = set(prepared.tools)
        for names in prepared.connection_tools.values():
            offered.update(names)
        lacking = [name for name in tools if name not in offered]
        if lacking:
            missing["tools"] = lacking
    if missing:
        what = ", ".join(
            f"{key} {value if isinstance(value, str) else ', '.join(value)}"
            for key, value in missing.items()
        )
        raise FevexRunError(
            "CHECKPOINT_DEPENDENCY_MISSING",
            f"The checkpoint needs what this app does not have ({what}); nothing was started.",
            details={"missing": missing},
        )


def _not_exportable(run: AgentRun, reason: str, why: str) -> FevexRunError:
    return FevexRunError(
        "CHECKPOINT_NOT_EXPORTABLE",
        f"Run {run.id} cannot be exported: {why}.",
        run_id=run.id,
        details={"run_id": run.id, "reason": reason, "status": run.status},
    )


def _unsupported(why: str, reason: str) -> FevexRunError:
    return FevexRunError(
        "CHECKPOINT_UNSUPPORTED",
        f"The checkpoint cannot be restored: {why}.",
        details={"reason": reason},
    )


def _transcript_invalid(reason: str, why: str, **details: Any) -> FevexRunError:
    return FevexRunError(
        "CHECKPOINT_TRANSCRIPT_INVALID",
        f"The checkpoint cannot be restored: {why}. Nothing was started.",
        details={"reason": reason, **details},
    )
