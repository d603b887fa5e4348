"""Authorization policies: callbacks that may deny a tool call at each stage.

A policy is called with a :class:`PolicyRequest` before approval is resolved, before the
first credential is resolved, before each effect or retry, and before each completion a
tool asks of an app model (stage ``"completion"``, see
:meth:`~fevex.ToolContext.complete`: ``model`` names the model and ``input`` is the
request, its messages as JSON). It returns ``None`` to
allow (or an awaitable resolving to ``None``) and raises to deny; any other return value
is a contract error, so a policy that returns ``False`` meaning "deny" never silently allows.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from fevex.errors import FevexError, FevexRunError

__all__ = ["Policy", "PolicyRequest", "PolicyStage", "enforce_policies"]

PolicyStage = Literal["approval", "credentials", "effect", "retry", "completion"]


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    stage: PolicyStage
    run_id: str
    session_id: str
    agent_name: str
    tool_name: str
    tool_call_id: str
    input: Any
    risk: str
    attempt: int = 1
    credential: str | None = None
    model: str | None = None


Policy = Callable[[PolicyRequest], Awaitable[None] | None]


async def enforce_policies(policies: tuple[Policy, ...], request: PolicyRequest) -> None:
    for policy in policies:
        try:
            result: Any = policy(request)
            if inspect.isawaitable(result):
                result = await result
        except FevexError:
            raise
        except Exception as error:
            raise FevexRunError(
                "POLICY_DENIED",
                f"A policy denied {request.stage} of tool {request.tool_name}: {error}",
                category="tool",
                details={"stage": request.stage, "tool_name": request.tool_name},
            ) from error
        if result is not None:
            raise FevexRunError(
                "POLICY_CONTRACT_VIOLATION",
                f"Policy {getattr(policy, '__name__', policy)!r} returned {result!r}; a policy "
                "returns None to allow and raises to deny.",
                category="configuration",
            )
