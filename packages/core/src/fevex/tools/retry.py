"""A tool's way to hand a message back to the model for another try."""

from __future__ import annotations

__all__ = ["ToolRetry"]


class ToolRetry(Exception):
    """Raise from a tool to give the model ``message`` and let it call again.

    The call ends as a failed tool result that the model reads (``{"code": "TOOL_FAILED",
    "message": message}``), and the run goes on to the next model step, within the run's
    ``Limits.max_tool_retries``; once those are used, the run fails with ``TOOL_FAILED``.
    Any tool may raise it: raising it says the tool checked the request and applied no
    effect, so fevex neither retries the function (its ``retry`` policy) nor repeats the
    call on recovery. The message reaches the model, events and the store, scrubbed of the
    call's credentials: write it for the model, without secrets.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = str(message)
