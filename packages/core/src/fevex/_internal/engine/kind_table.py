"""The kernel's run kinds by name: every kind registered when the kernel is created, each
built the first time it is looked up.

An agent app's first run looks up the agent kind only, so the workflow and team drivers
(and whatever else a kind's module imports) load when a run of theirs is first started,
continued or claimed, never at ``create_fevex``. A kind is built at most once and is then
the kernel's for its whole life; the table is read-only, and iterating it (a worker asking
for every name it can claim) builds them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from fevex._internal.engine.run_kind import RunKind

__all__ = ["KindTable"]


class KindTable(Mapping[str, RunKind]):
    __slots__ = ("_built", "_makers")

    def __init__(self, makers: Mapping[str, Callable[[], RunKind]]) -> None:
        self._makers = dict(makers)
        self._built: dict[str, RunKind] = {}

    def __getitem__(self, name: str) -> RunKind:
        try:
            return self._built[name]
        except KeyError:
            make = self._makers[name]
        # setdefault: two threads building a kind at once both get the one kept.
        return self._built.setdefault(name, make())

    def __contains__(self, name: object) -> bool:
        # Mapping's own would build the kind to answer.
        return name in self._makers

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)
