"""``fevex eval``: a dataset of cases against an agent or a workflow, scored and compared
with a baseline report (the work itself is :mod:`fevex.evals.command`)."""

from __future__ import annotations

import argparse

from fevex.cli.app_option import app_reference, load_app
from fevex.cli.argument_types import positive_int, positive_seconds, score_tolerance
from fevex.plugins.commands import Command

__all__ = ["EVAL"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--app", required=True, type=app_reference, help="module:attribute of your fevex app"
    )
    parser.add_argument(
        "--dataset",
        required=True,
        metavar="FILE",
        help="cases as JSON Lines (.jsonl, one {id, input, expected, metadata} per line) or "
        "JSON (.json: a list of cases, or {name, version, cases})",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--agent", metavar="NAME", help="the agent each case runs")
    target.add_argument("--workflow", metavar="NAME", help="the workflow each case runs")
    parser.add_argument(
        "--baseline", metavar="FILE", help="a report written by --out before, to compare with"
    )
    parser.add_argument(
        "--out", metavar="FILE", help="write the report as canonical JSON (a new baseline)"
    )
    parser.add_argument("--html", metavar="FILE", help="write a self-contained HTML page")
    parser.add_argument(
        "--concurrency", type=positive_int, default=1, help="cases run at once (default 1)"
    )
    parser.add_argument(
        "--scorers",
        metavar="MODULE:ATTRIBUTE",
        help="a list of scorers, or a function returning one (default: exact_output, "
        "tool_selection and forbidden_tools)",
    )
    parser.add_argument(
        "--tolerance",
        type=score_tolerance,
        default=0.0,
        help="how far a score may drop before it is a regression (0 to 1, default 0)",
    )
    parser.add_argument("--suite", metavar="NAME", help="the suite's name (default: the dataset's)")
    parser.add_argument(
        "--target-version", metavar="TEXT", help="what is evaluated (a prompt or model revision)"
    )
    parser.add_argument("--timeout", type=positive_seconds, help="seconds each case's run may take")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 also when any case does not pass"
    )


def _eval(args: argparse.Namespace) -> int:
    from fevex.evals.command import eval_command

    return eval_command(args, load_app)


EVAL = Command(
    name="eval",
    help="Run a dataset of cases against an agent or a workflow, score each case and "
    "compare with a baseline report: exit status 1 on a regression, 0 otherwise, 2 when "
    "the evaluation cannot run.",
    handler=_eval,
    arguments=_arguments,
)
