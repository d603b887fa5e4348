"""The thread loops of blocking calls. They live in the engine
(:mod:`fevex._internal.engine.thread_loop`) so that the kits, which sit below the launcher,
give their own blocking twins the same loop as the app's; launch keeps importing them here."""

from fevex._internal.engine.thread_loop import iterate_sync, run_sync

__all__ = ["iterate_sync", "run_sync"]
