"""Durable professional tasks (DESIGN §12): an app-triggered sequence of steps with a fixed
deadline, an attempt count, a model-call budget reserved per attempt, re-authorization on
every attempt and ``reconcile`` for steps whose effects may already have happened.

Register tasks with ``create_fevex(tasks=[...])``; ``app.create_task`` stores a ready task
and ``app.run_task`` runs an attempt of it.
"""

from fevex.kits.tasks.definition import DurableTask, TaskStep, define_durable_task
from fevex.kits.tasks.task_context import TaskContext

__all__ = ["DurableTask", "TaskContext", "TaskStep", "define_durable_task"]
