"""``fevex eval``: a dataset against an agent or workflow, as a CI gate.

Exit status 0 when nothing regressed against ``--baseline`` (or no baseline was given),
1 when something did (with ``--strict``, also when a case did not pass), and 2 when the
evaluation could not run: bad arguments, an unreadable dataset or baseline, an app or a
target that cannot be found. Progress goes to stderr (a bar on a terminal, one line per
case otherwise); the summary table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fevex.errors import FevexConfigurationError, FevexError
from fevex.evals.comparison import compare_evaluation_reports
from fevex.evals.dataset import EvalDataset, load_dataset
from fevex.evals.html_report import render_html_report
from fevex.evals.progress import EvalProgress
from fevex.evals.report import EvalReport, load_eval_report, serialize_eval_report
from fevex.evals.reporters import format_summary
from fevex.evals.runner import run_evaluation
from fevex.evals.scorers import exact_output, forbidden_tools, tool_selection
from fevex.evals.scoring import Scorer

__all__ = ["eval_command"]

EXIT_REGRESSION = 1
EXIT_CANNOT_EVALUATE = 2


def eval_command(args: argparse.Namespace, load_app: Callable[[str, str | None], Any]) -> int:
    """The handler of ``fevex eval``; ``load_app`` is the CLI's ``--app`` loader."""
    try:
        dataset = load_dataset(args.dataset)
        baseline = None if args.baseline is None else load_eval_report(args.baseline)
        app = load_app(args.app, None)
        scorers = _scorers(args.scorers)
        report = asyncio.run(_evaluate(app, dataset, scorers, args))
    except FevexError as error:
        print(f"fevex: {error}", file=sys.stderr)
        return EXIT_CANNOT_EVALUATE
    comparison = (
        None
        if baseline is None
        else compare_evaluation_reports(baseline, report, tolerance=args.tolerance)
    )
    try:
        if args.out is not None:
            _write(args.out, serialize_eval_report(report))
        if args.html is not None:
            _write(args.html, render_html_report(report, baseline=baseline, comparison=comparison))
    except OSError as error:
        print(f"fevex: cannot write the report: {error}", file=sys.stderr)
        return EXIT_CANNOT_EVALUATE
    sys.stdout.write(format_summary(report, baseline, comparison))
    sys.stdout.flush()
    if comparison is not None and comparison.has_regressions:
        return EXIT_REGRESSION
    if args.strict and any(case.status != "passed" for case in report.cases):
        return EXIT_REGRESSION
    return 0


async def _evaluate(
    app: Any, dataset: EvalDataset, scorers: list[Scorer], args: argparse.Namespace
) -> EvalReport:
    progress = EvalProgress(sys.stderr, len(dataset.cases))
    try:
        return await run_evaluation(
            app,
            suite_name=args.suite or dataset.name,
            target_version=args.target_version,
            agent_name=args.agent,
            workflow_name=args.workflow,
            dataset=dataset,
            scorers=scorers,
            concurrency=args.concurrency,
            timeout=args.timeout,
            on_case=progress.case_finished,
        )
    finally:
        progress.close()
        await app.close()


def _scorers(reference: str | None) -> list[Scorer]:
    """The scorers ``--scorers module:attribute`` names (a list, or a function returning
    one), or the defaults, which each score only the cases whose expectations they read
    (``expected.output``, ``expected.tools``, ``expected.forbidden_tools``)."""
    if reference is None:
        return [exact_output(), tool_selection(), forbidden_tools()]
    module_name, _, attribute = reference.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
        if callable(target) and not isinstance(target, Scorer):
            target = target()
    except Exception as error:
        raise FevexConfigurationError(
            "INVALID_ARGUMENT",
            f"--scorers {reference}: loading it raised {type(error).__name__}: {error}.",
        ) from error
    if isinstance(target, Scorer) or not isinstance(target, list | tuple):
        raise FevexConfigurationError(
            "INVALID_ARGUMENT",
            f"--scorers {reference} is not a list of scorers or a function returning one.",
        )
    return list(target)


def _write(path: str, text: str) -> None:
    """Replace ``path`` whole: a reader (or a crash) never sees half a report."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8", newline="\n")
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
