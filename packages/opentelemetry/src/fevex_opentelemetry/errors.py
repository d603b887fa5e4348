"""The error an export reports when part of a batch could not go to OpenTelemetry.

Every well-formed span of the batch is exported first; the error then names each problem
(the span's name and id, the field, why), never an attribute's value, which can be content.
"""

from __future__ import annotations

from fevex.errors import FevexError

__all__ = ["SpanProblem", "export_error"]

SpanProblem = tuple[str, str]  # (the span as the message names it, what went wrong)

# At most this many problems are spelt out in the message; `details` keeps them all.
_SHOWN = 5


def export_error(
    total: int,
    skipped: list[SpanProblem],
    trimmed: list[SpanProblem],
    failed: list[SpanProblem],
    cause: BaseException | None = None,
) -> FevexError:
    """``TRACE_EXPORT_FAILED`` when OpenTelemetry itself raised for ``failed`` spans, else
    ``TRACE_SPAN_INVALID``: ``skipped`` spans were malformed and not exported, ``trimmed``
    ones were exported without attributes OpenTelemetry cannot carry."""
    parts = []
    if skipped:
        parts.append(f"{len(skipped)} malformed, not exported")
    if trimmed:
        parts.append(f"{len(trimmed)} exported without some attributes")
    if failed:
        parts.append(f"{len(failed)} failed in the OpenTelemetry SDK")
    problems = [*skipped, *trimmed, *failed]
    listed = "; ".join(f"{span}: {problem}" for span, problem in problems[:_SHOWN])
    more = f"; and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else ""
    error = FevexError(
        "TRACE_EXPORT_FAILED" if failed else "TRACE_SPAN_INVALID",
        f"OpenTelemetry export of {total} spans: {', '.join(parts)}. {listed}{more}.",
        category="plugin" if failed else "validation",
        details={
            "skipped": [f"{span}: {problem}" for span, problem in skipped],
            "trimmed": [f"{span}: {problem}" for span, problem in trimmed],
            "failed": [f"{span}: {problem}" for span, problem in failed],
        },
    )
    error.__cause__ = cause
    return error
