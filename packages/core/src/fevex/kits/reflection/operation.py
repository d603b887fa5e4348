"""One reflection in progress: its budgets, the evidence it returned, and the answer of
each ``history_query`` action.

A refusal the model can act on (a made-up evidence id, a spent budget, a run it never
discovered, a malformed report) goes back to it as the tool's error (``ToolRetry``) with a
stable code at the head of its message, and what it costs the report is kept as a
limitation. What the model cannot correct (a callback breaking its contract, a broken
source) is kept in ``fatal`` and ends the operation.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fevex._ground.clock import utc_now
from fevex.errors import FevexRunError
from fevex.kits.reflection.metadata import fixed_metadata
from fevex.kits.reflection.report import (
    Draft,
    DraftInvalid,
    Finding,
    Limitation,
    LimitationKind,
    ReflectionCoverage,
    ReflectionReport,
    parse_draft,
)
from fevex.kits.reflection.sources import ReflectionSource, SourcePage, SourceScope
from fevex.tools import ToolRetry

__all__ = ["Budget", "Operation"]

_DISCOVER_PAGE = 20
_READ_PAGE = 50
_STATUSES = ("running", "paused", "completed", "failed", "cancelled")
# The codes a query's refusal is answered with; anything else from a source is fatal.
_ANSWERED: dict[str, LimitationKind] = {
    "REFLECTION_QUERY_REFUSED": "refused",
    "REFLECTION_RUN_OUT_OF_SCOPE": "protocol",
    # The store's answer to a cursor or filter the model made up.
    "INVALID_CURSOR": "protocol",
    "INVALID_ARGUMENT": "protocol",
}


@dataclass(frozen=True, slots=True)
class Budget:
    max_calls: int
    reserve_calls: int
    max_pages: int
    max_events: int
    max_evidence_chars: int


@dataclass
class Operation:
    """The state of one reflection, keyed by its run's id while the run lasts."""

    question: str
    source: ReflectionSource
    scope: SourceScope
    budget: Budget
    calls: int = 0
    pages: int = 0
    events: int = 0
    chars: int = 0
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    discovered: set[str] = field(default_factory=set)
    read: set[str] = field(default_factory=set)
    gaps: set[str] = field(default_factory=set)
    complete: bool = True
    accepted: Draft | None = None
    last_draft: Draft | None = None
    fatal: BaseException | None = None
    limitations: dict[tuple[str, str], Limitation] = field(default_factory=dict)
    _prefix: str = field(default_factory=lambda: os.urandom(4).hex())

    # -- the tool's actions ---------------------------------------------------------

    async def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        action = request.get("action")
        if self.accepted is not None:
            raise self._refuse(
                "REFLECTION_REPORT_ACCEPTED",
                "the report is accepted; end the run with a one-line answer.",
            )
        if action == "submit":
            return self._submit(request.get("report"))
        self._check_query_budget(action)
        try:
            if action == "discover":
                return await self._discover(request)
            return await self._read(request)
        except FevexRunError as error:
            kind = _ANSWERED.get(error.code)
            if kind is None:
                self.fatal = error
                raise
            self.note(kind, f"a {action} query was refused ({error.code}).")
            raise ToolRetry(f"{error.code}: {error.message}") from None

    def _check_query_budget(self, action: Any) -> None:
        budget = self.budget
        if budget.max_calls - self.calls <= budget.reserve_calls:
            spent = f"the model calls left are kept for the report ({budget.reserve_calls})"
        elif self.pages >= budget.max_pages:
            spent = f"max_pages ({budget.max_pages}) pages are read"
        elif self.chars >= budget.max_evidence_chars:
            spent = f"max_evidence_chars ({budget.max_evidence_chars}) characters are returned"
        elif action == "read" and self.events >= budget.max_events:
            spent = f"max_events ({budget.max_events}) events are read"
        else:
            return
        self.note("budget", f"the work stopped early: {spent}.")
        raise self._refuse("REFLECTION_BUDGET_EXHAUSTED", f"{spent}; submit the report now.")

    async def _discover(self, request: Mapping[str, Any]) -> dict[str, Any]:
        filters: dict[str, str] = {}
        for key in ("status", "kind", "name"):
            value = request.get(key)
            if value is None:
                continue
            if not isinstance(value, str) or (key == "status" and value not in _STATUSES):
                raise self._refuse("REFLECTION_QUERY_INVALID", f"{key} {value!r} is not valid.")
            filters[key] = value
        cursor = self._cursor(request)
        limit = self._limit(request, _DISCOVER_PAGE)
        self.pages += 1
        page = await self.source.discover(self.scope, filters, cursor, limit)
        items, cut = self._returned(page, "discovery")
        self.discovered.update(item["run_id"] for item in items if "run_id" in item)
        return self._output(items, page, cut)

    async def _read(self, request: Mapping[str, Any]) -> dict[str, Any]:
        run_id = request.get("run_id")
        if not isinstance(run_id, str) or run_id not in self.discovered:
            self.note("protocol", "a read of a run this operation did not discover was refused.")
            raise self._refuse(
                "REFLECTION_RUN_NOT_DISCOVERED",
                f"run {run_id!r} was not discovered in this reflection; discover runs first.",
            )
        cursor = self._cursor(request)
        limit = min(self._limit(request, _READ_PAGE), self.budget.max_events - self.events)
        self.pages += 1
        page = await self.source.read(self.scope, run_id, cursor, limit)
        items, cut = self._returned(page, f"the read of run {run_id}")
        self.events += len(items)
        self.read.add(run_id)
        if page.cursor is None and not cut:
            self.gaps.discard(run_id)
        else:
            self.gaps.add(run_id)
        return self._output(items, page, cut)

    def _submit(self, report: Any) -> dict[str, Any]:
        try:
            draft = parse_draft(report)
        except DraftInvalid as invalid:
            self.note("protocol", "a malformed report was refused.")
            raise self._refuse("REFLECTION_REPORT_INVALID", str(invalid)) from None
        self.last_draft = draft
        unknown = sorted(draft.cited() - set(self.evidence))
        if unknown:
            raise self._refuse(
                "REFLECTION_EVIDENCE_UNKNOWN",
                f"evidence ids {unknown} were not returned in this reflection; cite only ids "
                "from history_query results, or move the finding to hypotheses without them.",
            )
        self.accepted = draft
        return {"accepted": True, "next": "End the run now with a one-line answer."}

    # -- evidence ------------------------------------------------------------------

    def _returned(self, page: SourcePage, what: str) -> tuple[list[dict[str, Any]], bool]:
        """The page's items as the model gets them: projected, each with its evidence id,
        expired ones left out, while the evidence characters last; and whether those
        characters cut the page short (its cursor, past what was not returned, is then
        withheld)."""
        if not page.complete:
            self.complete = False
            self.note("incomplete_read", f"{what} could not look at everything it covers.")
        now = utc_now()
        items: list[dict[str, Any]] = []
        for raw in page.items:
            item = fixed_metadata(raw)
            expires_at = item.get("expires_at")
            if _expired(expires_at, now):
                self.note("expired", f"items of {what} had expired and were not returned.")
                continue
            evidence_id = f"ev-{self._prefix}-{len(self.evidence) + 1}"
            shown = {"evidence_id": evidence_id, **item}
            size = len(json.dumps(shown, separators=(",", ":")))
            if self.chars + size > self.budget.max_evidence_chars:
                self.complete = False
                self.note(
                    "budget",
                    f"max_evidence_chars ({self.budget.max_evidence_chars}) cut {what} short.",
                )
                return items, True
            self.chars += size
            self.evidence[evidence_id] = item
            items.append(shown)
        return items, False

    def _output(self, items: list[dict[str, Any]], page: SourcePage, cut: bool) -> dict[str, Any]:
        budget = self.budget
        return {
            "source": self.source.id,
            "items": items,
            "cursor": None if cut else page.cursor,
            "truncated": cut,
            "left": {
                "model_calls": budget.max_calls - self.calls,
                "pages": budget.max_pages - self.pages,
                "events": budget.max_events - self.events,
                "evidence_chars": budget.max_evidence_chars - self.chars,
            },
        }

    def _cursor(self, request: Mapping[str, Any]) -> str | None:
        cursor = request.get("cursor")
        if cursor is not None and (not isinstance(cursor, str) or len(cursor) > 256):
            raise self._refuse("REFLECTION_QUERY_INVALID", "cursor must be a cursor returned.")
        return cursor

    def _limit(self, request: Mapping[str, Any], most: int) -> int:
        limit = request.get("limit", most)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise self._refuse("REFLECTION_QUERY_INVALID", "limit must be a positive integer.")
        return min(limit, most)

    def note(self, kind: LimitationKind, message: str) -> None:
        self.limitations.setdefault((kind, message), Limitation(kind, message))

    def _refuse(self, code: str, message: str) -> ToolRetry:
        return ToolRetry(f"{code}: {message}")

    # -- delivery ------------------------------------------------------------------

    def report(self, run_id: str) -> ReflectionReport:
        """The report as delivered now: the accepted draft, else what of the last draft its
        evidence supports; findings resting on expired evidence are dropped."""
        now = utc_now()
        draft = self.accepted
        if draft is None:
            draft = self.last_draft or Draft((), (), (), ())
            self.note(
                "protocol",
                "no report was accepted before the run ended"
                + (
                    "; the last one submitted is kept where its evidence holds."
                    if self.last_draft is not None
                    else "."
                ),
            )
        observed = self._supported(draft.observed, "observed", now)
        hypotheses = self._supported(draft.hypotheses, "hypothesis", now)
        for stated in draft.limitations:
            self.note("stated", stated)
        for run_id_read in sorted(self.gaps):
            self.note("incomplete_read", f"run {run_id_read} was read only in part.")
        expiries = [
            _instant(expires)
            for finding in (*observed, *hypotheses)
            for ref in finding.evidence
            if isinstance(expires := self.evidence[ref].get("expires_at"), str)
        ]
        return ReflectionReport(
            question=self.question,
            observed=observed,
            hypotheses=hypotheses,
            recommendations=draft.recommendations,
            limitations=tuple(self.limitations.values()),
            coverage=self._coverage(),
            created_at=now,
            expires_at=_iso(min(expiries)) if expiries else None,
            run_id=run_id,
        )

    def _supported(self, findings: tuple[Finding, ...], what: str, now: str) -> tuple[Finding, ...]:
        kept = []
        for finding in findings:
            unknown = [ref for ref in finding.evidence if ref not in self.evidence]
            if unknown:
                self.note("unsupported", f"an {what} finding citing unseen evidence was dropped.")
                continue
            expired = [
                ref
                for ref in finding.evidence
                if _expired(self.evidence[ref].get("expires_at"), now)
            ]
            if expired:
                self.note("expired", f"an {what} finding whose evidence expired was dropped.")
                continue
            kept.append(finding)
        return tuple(kept)

    def _coverage(self) -> ReflectionCoverage:
        return ReflectionCoverage(
            source=self.source.id,
            runs_discovered=len(self.discovered),
            runs_read=len(self.read),
            events_read=self.events,
            pages=self.pages,
            evidence_items=len(self.evidence),
            evidence_chars=self.chars,
            model_calls=self.calls,
            complete=self.complete and not self.gaps,
            gaps=tuple(sorted(self.gaps)),
        )


def _instant(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _expired(expires_at: Any, now: str) -> bool:
    """Whether an item's ``expires_at`` (the field's shape already checked) has passed."""
    return isinstance(expires_at, str) and _instant(expires_at) <= _instant(now)
