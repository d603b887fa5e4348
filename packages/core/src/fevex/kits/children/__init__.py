"""Bounded child runs (DESIGN §12): fan a step out to child runs within the capacity of
the root run, check every result, and commit in declaration order only when all are
accepted."""

from fevex.kits.children.child_task import ChildTask
from fevex.kits.children.group import run_children

__all__ = ["ChildTask", "run_children"]
