"""The errors this plugin raises: fevex errors with stable codes, one place to read them.

Definition-time problems (the document, the options, a refused server) are
:class:`~fevex.FevexConfigurationError`; problems while calling an operation are
:class:`~fevex.FevexRunError`. Messages name operations, locations and hosts, never header
values, credentials or full URLs (a query string may carry a key).
"""

from __future__ import annotations

from typing import Any

from fevex.errors import ErrorCategory, FevexConfigurationError, FevexRunError

__all__ = ["configuration_error", "run_error"]


def configuration_error(
    code: str, message: str, details: dict[str, Any] | None = None
) -> FevexConfigurationError:
    return FevexConfigurationError(code, message, details=details, category="configuration")


def run_error(
    code: str,
    message: str,
    *,
    recoverable: bool = False,
    details: dict[str, Any] | None = None,
    category: ErrorCategory = "tool",
) -> FevexRunError:
    return FevexRunError(code, message, recoverable=recoverable, details=details, category=category)
