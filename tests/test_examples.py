"""The programs the README quotes run as written."""

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_quickstart_runs_an_agent_on_the_default_store() -> None:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = completed.stdout.splitlines()
    assert [line.split()[1] for line in lines[:9]] == [
        "run.started",
        "model.started",
        "model.completed",
        "tool.started",
        "tool.completed",
        "model.started",
        "model.output.delta",
        "model.completed",
        "run.completed",
    ]
    assert lines[-1].endswith("completed: Account 42 is active.")


def test_the_reflection_example_cites_what_it_read_and_never_sees_the_secret() -> None:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / "kit_reflection.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = completed.stdout.splitlines()
    assert lines[0] == "support run failed: TOOL_FAILED"
    assert lines[1].startswith("observed: The refund run failed on its tool. ['ev-")
    assert lines[-2] == "reflection run: completed"
    assert lines[-1] == "the secret reached the model: False"


def test_the_durable_task_example_publishes_once() -> None:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / "kit_tasks.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert completed.stdout.splitlines() == [
        "attempt 1: [TASK_STEP_FAILED] Task step 'publish' raised RuntimeError: "
        "the printer is down",
        "attempt 2: text='Draft 3' summary='Looks good.' receipt='r-1'",
        "attempts 2, budget {'limit': 6, 'reserved': 4, 'used': 1}",
        "published 1 time(s)",
    ]


def test_the_children_kit_example_commits_only_an_accepted_group() -> None:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / "kit_children.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert completed.stdout.splitlines() == [
        "results: ['RED', 'GREEN', 'BLUE']",
        "committed: ['part-0=RED', 'part-1=GREEN', 'part-2=BLUE']",
        "children: 3 ['completed']",
        "failed: CHILD_GROUP_FAILED [('part-1', 'CHILD_RESULT_REJECTED')]",
        "committed: []",
    ]


def test_the_family_example_promotes_against_the_revision_it_saw() -> None:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / "kit_family.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert completed.stdout.splitlines() == [
        "created: candidate, active None",
        "promoted: active is the first version: True",
        "stale promotion: FAMILY_CONFLICT",
        "branch continues: noted: Refunds take five days. / And for store credit?",
        "revision 4: retired, active",
    ]


def test_the_publication_example_gives_agents_the_official_handbook_only() -> None:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / "kit_publication.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert completed.stdout.splitlines() == [
        "agent, a candidate only: I have no handbook.",
        "published revision 1",
        "agent, two candidates pending: Refunds within 30 days of purchase.",
        "an agent user publishing: PUBLICATION_UNAUTHORIZED",
        "agent, after the editor published: Refunds within 60 days of purchase.",
        "the other candidate: PUBLICATION_STALE",
        "record revision 5, published revision 2, 1 candidate(s) pending",
    ]


def test_every_example_is_run_by_a_test() -> None:
    # By its path, its module (`examples.demo_app`), or its file name beside EXAMPLES here.
    tests = [
        path.read_text(encoding="utf-8")
        for folder in (EXAMPLES.parent / "tests", *EXAMPLES.parent.glob("packages/*/tests"))
        for path in folder.rglob("*.py")
    ]
    unrun = [
        example.name
        for example in sorted(EXAMPLES.glob("*.py"))
        if not any(
            f"examples/{example.name}" in source
            or f"examples.{example.stem}" in source
            or f'"examples" / "{example.name}"' in source
            or f'EXAMPLES / "{example.name}"' in source
            for source in tests
        )
    ]
    assert unrun == []
