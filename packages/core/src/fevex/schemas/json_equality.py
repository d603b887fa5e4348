"""Equality of JSON values as JSON Schema defines it, in time linear in their size.

``uniqueItems``, ``enum`` and ``const`` compare values. Compared pair by pair, a hostile
array of n items alike but for their last element takes n² walks of whole items; here each
value node gets a token once, and two values are equal as JSON exactly when their tokens
are, so a uniqueness check is one pass over hashes.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

__all__ = ["JsonEquality", "NestedTooDeepError"]


class NestedTooDeepError(Exception):
    """A value nests deeper than the limit it is compared under."""


class JsonEquality:
    """Tokens for JSON equality, for the values of one validation.

    As JSON means it: ``true`` is not ``1``, ``1`` is ``1.0``, the order of an object's
    keys does not matter. A scalar's token is a tagged tuple; an array's or object's token
    is a number standing for its content (the tokens of its items), so the key that gets
    hashed is flat and an item's form is computed once however often it is compared.
    Containers are walked with an explicit stack, never by recursion.
    """

    def __init__(self, max_depth: int) -> None:
        self._max_depth = max_depth
        self._interned: dict[Hashable, int] = {}
        # By id(): every node belongs to the value or schema being validated, which stay
        # alive (and unchanged) for the whole validation.
        self._containers: dict[int, int] = {}
        self._unique: dict[int, bool] = {}
        self._sets: dict[int, frozenset[Hashable]] = {}

    def token(self, value: Any) -> Hashable:
        if not isinstance(value, list | dict):
            return _scalar_token(value)
        stack = [(value, 0)]
        while stack:
            node, level = stack[-1]
            if id(node) in self._containers:
                stack.pop()
                continue
            if level > self._max_depth:
                raise NestedTooDeepError
            items = node.values() if isinstance(node, dict) else node
            pending = [
                (item, level + 1)
                for item in items
                if isinstance(item, list | dict) and id(item) not in self._containers
            ]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            key: Hashable
            if isinstance(node, dict):
                key = ("object", frozenset((k, self._known(v)) for k, v in node.items()))
            else:
                key = ("array", tuple(self._known(item) for item in node))
            self._containers[id(node)] = self._interned.setdefault(key, len(self._interned))
        return self._containers[id(value)]

    def _known(self, value: Any) -> Hashable:
        if isinstance(value, list | dict):
            return self._containers[id(value)]
        return _scalar_token(value)

    def equal(self, one: Any, two: Any) -> bool:
        return self.token(one) == self.token(two)

    def all_unique(self, items: list[Any]) -> bool:
        known = self._unique.get(id(items))
        if known is None:
            seen: set[Hashable] = set()
            for item in items:
                token = self.token(item)
                if token in seen:
                    break
                seen.add(token)
            known = self._unique[id(items)] = len(seen) == len(items)
        return known

    def one_of(self, value: Any, allowed: list[Any]) -> bool:
        tokens = self._sets.get(id(allowed))
        if tokens is None:
            tokens = self._sets[id(allowed)] = frozenset(self.token(item) for item in allowed)
        return self.token(value) in tokens


def _scalar_token(value: Any) -> Hashable:
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int | float):
        # Python compares int and float exactly, so 1 and 1.0 share a key and 2**53 + 1
        # stays apart from 2.0**53, as the numbers they stand for do.
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    return ("null", None) if value is None else ("other", id(value))
