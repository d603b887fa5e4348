"""Who a run runs for, and what it may know about them: the execution context.

A context travels with a run: it is given per request (``context=``), stored with the run
as plain JSON, and inherited by the run's children. A child's context is its parent's
merged with its own: namespace, attributes and prompt values merge (the child's keys win),
but an actor the parent already has is never replaced, so that a delegated run cannot act
for somebody else than the person its root run was started for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fevex.errors import FevexRunError
from fevex.schemas.schema import ensure_json

__all__ = ["ExecutionContext"]


@dataclass(frozen=True, slots=True)
class ExecutionContext:
    """``actor`` (``{"id": ..., "type": ...}``, from authentication, never from a model),
    ``namespace`` (what scopes memory and other per-tenant data), free ``attributes`` and
    ``prompt_values`` (text that instructions may refer to). Every value is plain JSON."""

    actor: Mapping[str, Any] | None = None
    namespace: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    prompt_values: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.actor is not None and not (
            isinstance(self.actor, Mapping)
            and isinstance(self.actor.get("id"), str)
            and self.actor["id"]
        ):
            raise _invalid("actor must be a mapping with a non-empty 'id'.")
        if self.namespace is not None and (
            not isinstance(self.namespace, str) or not self.namespace
        ):
            raise _invalid("namespace must be a non-empty string or None.")
        if not isinstance(self.attributes, Mapping):
            raise _invalid("attributes must be a mapping.")
        if not isinstance(self.prompt_values, Mapping) or not all(
            isinstance(key, str) and isinstance(value, str)
            for key, value in self.prompt_values.items()
        ):
            raise _invalid("prompt_values must map names to text.")
        try:
            ensure_json(self.to_json())
        except TypeError as error:
            raise _invalid(f"the context cannot be stored: {error}.") from None

    def child(self, own: ExecutionContext | None) -> ExecutionContext:
        """The context of a child run that asked for ``own``: merged, the parent's actor
        kept when it has one."""
        if own is None:
            return self
        return ExecutionContext(
            actor=self.actor if self.actor is not None else own.actor,
            namespace=own.namespace if own.namespace is not None else self.namespace,
            attributes={**self.attributes, **own.attributes},
            prompt_values={**self.prompt_values, **own.prompt_values},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "actor": None if self.actor is None else dict(self.actor),
            "namespace": self.namespace,
            "attributes": dict(self.attributes),
            "prompt_values": dict(self.prompt_values),
        }

    @classmethod
    def from_json(cls, data: Any) -> ExecutionContext:
        """The context a store kept; an empty one for ``None`` (runs stored before
        contexts existed)."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise _invalid("a stored context must be a JSON object.")
        return cls(
            actor=data.get("actor"),
            namespace=data.get("namespace"),
            attributes=data.get("attributes") or {},
            prompt_values=data.get("prompt_values") or {},
        )

    @classmethod
    def of(cls, value: ExecutionContext | Mapping[str, Any] | None) -> ExecutionContext:
        """What ``context=`` accepts: a context, a mapping of its fields, or ``None``."""
        if isinstance(value, ExecutionContext):
            return value
        if value is None:
            return cls()
        if isinstance(value, Mapping):
            unknown = set(value) - {"actor", "namespace", "attributes", "prompt_values"}
            if unknown:
                raise _invalid(f"unknown context fields {sorted(unknown)}.")
            return cls(**value)
        raise _invalid("context must be an ExecutionContext, a mapping or None.")


def _invalid(message: str) -> FevexRunError:
    return FevexRunError("INVALID_CONTEXT", f"Invalid execution context: {message}")
