"""One self-contained HTML page for a report: per-case results and a chart of each case's
score against the baseline.

The page needs nothing from any host: styles are inline, the chart is inline SVG, and there
is no script at all (details open with ``<details>``). Every value from the suite (ids,
inputs, outputs, reasons, error messages) is escaped, and a Content-Security-Policy that
allows no script and no request is a second wall should anything slip through.
"""

from __future__ import annotations

from html import escape
from typing import Any

from fevex._ground.canonical_json import canonical_json
from fevex.evals.comparison import EvalComparison, compare_evaluation_reports
from fevex.evals.report import CaseResult, EvalReport

__all__ = ["render_html_report"]

_CHART_WIDTH = 760
_LABEL_WIDTH = 200
_ROW_HEIGHT = 30
_BAR_HEIGHT = 10
_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;
max-width:70rem;padding:0 1rem;color:#1f2328;background:#fff}
h1{font-size:1.6rem;margin:0 0 .25rem}h2{font-size:1.15rem;margin:2rem 0 .5rem}
.target{color:#59636e;margin:0}
.cards{display:flex;gap:.75rem;flex-wrap:wrap;margin-top:1rem}
.card{border:1px solid #d1d9e0;border-radius:6px;padding:.5rem .9rem;min-width:6rem}
.card b{display:block;font-size:1.4rem}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;vertical-align:top;padding:.35rem .5rem;border-bottom:1px solid #d1d9e0}
th{background:#f6f8fa}
.passed{color:#1a7f37}.failed,.error,.regressed{color:#cf222e}
.score{white-space:nowrap}.was{color:#59636e}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:.5rem;margin:.25rem 0;
border-radius:4px;max-height:20rem;overflow:auto}
details summary{cursor:pointer;color:#0969da}
ul.regressions li{color:#cf222e}
svg text{font:12px system-ui,sans-serif;fill:#1f2328}
"""


def render_html_report(
    report: EvalReport,
    *,
    baseline: EvalReport | None = None,
    comparison: EvalComparison | None = None,
    tolerance: float = 0.0,
) -> str:
    """The page for ``report``, against ``baseline`` when given (its regressions are
    computed with ``tolerance`` unless ``comparison`` is passed)."""
    if baseline is not None and comparison is None:
        comparison = compare_evaluation_reports(baseline, report, tolerance=tolerance)
    earlier = {case.case_id: case for case in baseline.cases} if baseline is not None else {}
    title = f"fevex eval: {report.suite_name}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        _header(report, comparison),
        "<h2>Scores against the baseline</h2>",
        _chart(report, earlier),
        _regressions(report, comparison),
        "<h2>Cases</h2>",
        _cases_table(report, earlier, comparison),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _header(report: EvalReport, comparison: EvalComparison | None) -> str:
    target = f"{report.target_kind} {report.target_name}"
    if report.target_version:
        target += f", version {report.target_version}"
    dataset = report.dataset_name
    if report.dataset_version:
        dataset += f" {report.dataset_version}"
    cards = [
        ("cases", len(report.cases), ""),
        ("passed", report.count("passed"), "passed"),
        ("failed", report.count("failed"), "failed"),
        ("errors", report.count("error"), "error"),
    ]
    if comparison is not None:
        cards.append(("regressions", len(comparison.regressions), "regressed"))
    card_html = "".join(
        f'<div class="card"><b class="{css}">{count}</b>{_e(label)}</div>'
        for label, count, css in cards
    )
    return (
        f"<header><h1>{_e(report.suite_name)}</h1>"
        f'<p class="target">{_e(target)} · dataset {_e(dataset)}</p>'
        f'<div class="cards">{card_html}</div></header>'
    )


def _chart(report: EvalReport, earlier: dict[str, CaseResult]) -> str:
    """Per case, a bar of its mean score now and, under it, in grey, in the baseline."""
    plot = _CHART_WIDTH - _LABEL_WIDTH - 50
    height = 54 + _ROW_HEIGHT * max(len(report.cases), 1)
    out = [
        f'<svg role="img" width="{_CHART_WIDTH}" height="{height}" '
        f'viewBox="0 0 {_CHART_WIDTH} {height}" aria-label="Each case\'s mean score, '
        'now and in the baseline">',
        '<rect x="0" y="0" width="12" height="10" fill="#1a7f37"/>'
        '<text x="16" y="9">now (red: not passed)</text>',
        '<rect x="180" y="0" width="12" height="10" fill="#afb8c1"/>'
        '<text x="196" y="9">baseline</text>',
    ]
    for tick in (0.0, 0.5, 1.0):
        x = _LABEL_WIDTH + plot * tick
        out.append(
            f'<line x1="{x:.1f}" y1="38" x2="{x:.1f}" y2="{height - 4}" stroke="#d1d9e0"/>'
            f'<text x="{x:.1f}" y="34" text-anchor="middle">{tick:g}</text>'
        )
    for row, case in enumerate(report.cases):
        top = 44 + row * _ROW_HEIGHT
        label = case.case_id if len(case.case_id) <= 28 else case.case_id[:27] + "…"
        now = _case_score(case)
        colour = "#1a7f37" if case.status == "passed" else "#cf222e"
        out.append(
            f'<text x="{_LABEL_WIDTH - 8}" y="{top + _BAR_HEIGHT + 2}" text-anchor="end">'
            f"<title>{_e(case.case_id)}</title>{_e(label)}</text>"
            f'<rect x="{_LABEL_WIDTH}" y="{top}" width="{plot * now:.1f}" height="{_BAR_HEIGHT}" '
            f'fill="{colour}"><title>{_e(case.case_id)} now: {now:.3f}</title></rect>'
            f'<text x="{_LABEL_WIDTH + plot * now + 4:.1f}" y="{top + _BAR_HEIGHT - 1}">'
            f"{now:.2f}</text>"
        )
        before = earlier.get(case.case_id)
        if before is not None:
            was = _case_score(before)
            out.append(
                f'<rect x="{_LABEL_WIDTH}" y="{top + _BAR_HEIGHT + 2}" width="{plot * was:.1f}" '
                f'height="{_BAR_HEIGHT - 4}" fill="#afb8c1"><title>{_e(case.case_id)} '
                f"baseline: {was:.3f}</title></rect>"
            )
    out.append("</svg>")
    return "".join(out)


def _regressions(report: EvalReport, comparison: EvalComparison | None) -> str:
    if comparison is None:
        return "<h2>Regressions</h2><p>No baseline was given.</p>"
    if not comparison.regressions:
        items = "<p>None against the baseline.</p>"
    else:
        items = (
            '<ul class="regressions">'
            + "".join(f"<li>{_e(r.message)}</li>" for r in comparison.regressions)
            + "</ul>"
        )
    if comparison.new_cases:
        items += f"<p>New cases: {_e(', '.join(comparison.new_cases))}</p>"
    return f"<h2>Regressions</h2>{items}"


def _cases_table(
    report: EvalReport, earlier: dict[str, CaseResult], comparison: EvalComparison | None
) -> str:
    rows = [
        "<table><thead><tr><th>case</th><th>status</th><th>scores</th><th>ms</th>"
        "<th>tokens</th><th>details</th></tr></thead><tbody>"
    ]
    for case in report.cases:
        before = earlier.get(case.case_id)
        regressed = comparison is not None and bool(comparison.for_case(case.case_id))
        status = case.status + (", regressed" if regressed else "")
        scores = "".join(_score_html(case, before, name) for name in sorted(case.scores))
        tokens = case.usage.total_tokens
        if tokens is None and (case.usage.input_tokens or case.usage.output_tokens):
            tokens = (case.usage.input_tokens or 0) + (case.usage.output_tokens or 0)
        rows.append(
            f'<tr id="case-{_e(case.case_id)}"><td>{_e(case.case_id)}</td>'
            f'<td class="{case.status}">{_e(status)}</td><td>{scores or "-"}</td>'
            f"<td>{case.duration_ms:.0f}</td><td>{'-' if tokens is None else tokens}</td>"
            f"<td>{_details(case)}</td></tr>"
        )
    rows.append("</tbody></table>")
    return "".join(rows)


def _score_html(case: CaseResult, before: CaseResult | None, name: str) -> str:
    score = case.scores[name]
    css = "passed" if score.passed else "failed"
    was = before.scores.get(name) if before is not None else None
    baseline = "" if was is None else f' <span class="was">(baseline {was.value:.2f})</span>'
    return (
        f'<div class="score"><span class="{css}">{_e(name)} {score.value:.2f}</span>'
        f"{baseline}</div><div>{_e(score.reason)}</div>"
    )


def _details(case: CaseResult) -> str:
    sections = [("input", case.input), ("expected", dict(case.expected)), ("output", case.output)]
    sections.append(("tool calls", list(case.tool_calls)))
    if case.error is not None:
        sections.append(("error", dict(case.error)))
    if case.metadata:
        sections.append(("metadata", dict(case.metadata)))
    body = "".join(f"<div>{_e(label)}</div><pre>{_e(_json(v))}</pre>" for label, v in sections)
    return f"<details><summary>show</summary>{body}</details>"


def _case_score(case: CaseResult) -> float:
    if not case.scores:
        return 0.0 if case.status == "error" else 1.0
    return sum(score.value for score in case.scores.values()) / len(case.scores)


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return canonical_json(value, indent=2)
    except TypeError:
        return repr(value)


def _e(text: str) -> str:
    return escape(str(text), quote=True)
