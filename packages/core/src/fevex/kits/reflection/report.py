"""What a reflection delivers (:class:`ReflectionReport`), and the report the model submits
before it is checked (:func:`parse_draft`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Draft",
    "DraftInvalid",
    "Finding",
    "Limitation",
    "LimitationKind",
    "ReflectionCoverage",
    "ReflectionReport",
    "parse_draft",
]

LimitationKind = Literal[
    "budget",
    "incomplete_read",
    "expired",
    "protocol",
    "refused",
    "unsupported",
    "stated",
    "persistence",
]

_MAX_STATEMENT_CHARS = 2_000
_MAX_ENTRIES = 50
_MAX_CITED = 50
_SECTIONS = ("observed", "hypotheses", "recommendations", "limitations")


@dataclass(frozen=True, slots=True)
class Finding:
    """A statement and the evidence ids it rests on (an observed finding cites at least one
    id returned in its operation; a hypothesis may cite none)."""

    statement: str
    evidence: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"statement": self.statement, "evidence": list(self.evidence)}


@dataclass(frozen=True, slots=True)
class Limitation:
    """Why the report may not tell the whole story: ``budget`` (a bound ended the work),
    ``incomplete_read`` (a source could not look at everything, or a read stopped early),
    ``expired`` (data that expired before delivery), ``protocol`` (the model broke the
    protocol: a malformed or refused report, a query the rules refuse), ``refused`` (the
    app's ``authorize`` refused a query), ``unsupported`` (a finding dropped for want of
    evidence), ``stated`` (the model's own) or ``persistence`` (a report asked to be kept
    that the memory store refused)."""

    kind: LimitationKind
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message}


@dataclass(frozen=True, slots=True)
class ReflectionCoverage:
    """How much was looked at: the source, the runs discovered and read, the events read,
    the pages, evidence items and characters returned, the model calls made; ``complete``
    is false when any read stopped early or a source could not look at everything, and
    ``gaps`` names the runs read only in part."""

    source: str
    runs_discovered: int
    runs_read: int
    events_read: int
    pages: int
    evidence_items: int
    evidence_chars: int
    model_calls: int
    complete: bool
    gaps: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "runs_discovered": self.runs_discovered,
            "runs_read": self.runs_read,
            "events_read": self.events_read,
            "pages": self.pages,
            "evidence_items": self.evidence_items,
            "evidence_chars": self.evidence_chars,
            "model_calls": self.model_calls,
            "complete": self.complete,
            "gaps": list(self.gaps),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ReflectionReport:
    """The answer to a question about run history. ``observed`` findings each cite evidence
    ids this operation returned; ``hypotheses`` and ``recommendations`` are the model's
    reading of them; ``limitations`` say what the report could not establish.
    ``persisted`` says whether it was kept (``persist=True``); ``created_at`` and
    ``expires_at`` (the earliest expiry of the evidence it cites, ``None`` when none
    expires) are ISO 8601 UTC. ``run_id`` is the reflection's own agent run."""

    question: str
    observed: tuple[Finding, ...]
    hypotheses: tuple[Finding, ...]
    recommendations: tuple[str, ...]
    limitations: tuple[Limitation, ...]
    coverage: ReflectionCoverage
    persisted: bool = False
    created_at: str
    expires_at: str | None = None
    run_id: str

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "observed": [finding.to_json() for finding in self.observed],
            "hypotheses": [finding.to_json() for finding in self.hypotheses],
            "recommendations": list(self.recommendations),
            "limitations": [limitation.to_json() for limitation in self.limitations],
            "coverage": self.coverage.to_json(),
            "persisted": self.persisted,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "run_id": self.run_id,
        }


@dataclass(frozen=True, slots=True)
class Draft:
    """A report as the model submitted it, its shape checked, its evidence not yet."""

    observed: tuple[Finding, ...]
    hypotheses: tuple[Finding, ...]
    recommendations: tuple[str, ...]
    limitations: tuple[str, ...]

    def cited(self) -> set[str]:
        return {ref for finding in (*self.observed, *self.hypotheses) for ref in finding.evidence}


class DraftInvalid(ValueError):
    """A submitted report that is not of the protocol's shape; the message says why."""


def parse_draft(value: Any) -> Draft:
    """The draft ``value`` is, or :class:`DraftInvalid` saying what is wrong with it."""
    if not isinstance(value, Mapping):
        raise DraftInvalid("report must be an object with " + ", ".join(_SECTIONS) + ".")
    unknown = sorted(str(key) for key in value if key not in _SECTIONS)
    if unknown:
        raise DraftInvalid(f"report has unknown fields {unknown}; it has {list(_SECTIONS)}.")
    observed = _findings(value.get("observed", []), "observed")
    for index, finding in enumerate(observed):
        if not finding.evidence:
            raise DraftInvalid(f"observed[{index}] cites no evidence id.")
    return Draft(
        observed,
        _findings(value.get("hypotheses", []), "hypotheses"),
        _texts(value.get("recommendations", []), "recommendations"),
        _texts(value.get("limitations", []), "limitations"),
    )


def _findings(value: Any, where: str) -> tuple[Finding, ...]:
    entries = _entries(value, where)
    findings = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or set(entry) - {"statement", "evidence"}:
            raise DraftInvalid(f"{where}[{index}] must be {{statement, evidence}}.")
        statement = _text(entry.get("statement"), f"{where}[{index}].statement")
        evidence = entry.get("evidence", [])
        if (
            not isinstance(evidence, list)
            or len(evidence) > _MAX_CITED
            or not all(isinstance(ref, str) and ref for ref in evidence)
        ):
            raise DraftInvalid(
                f"{where}[{index}].evidence must be a list of at most {_MAX_CITED} evidence ids."
            )
        findings.append(Finding(statement, tuple(dict.fromkeys(evidence))))
    return tuple(findings)


def _texts(value: Any, where: str) -> tuple[str, ...]:
    return tuple(_text(entry, f"{where}[{i}]") for i, entry in enumerate(_entries(value, where)))


def _entries(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list) or len(value) > _MAX_ENTRIES:
        raise DraftInvalid(f"{where} must be a list of at most {_MAX_ENTRIES} entries.")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_STATEMENT_CHARS:
        raise DraftInvalid(f"{where} must be text of 1 to {_MAX_STATEMENT_CHARS} characters.")
    return value
