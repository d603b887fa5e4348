"""What workflow and team definitions share: a durable async function of two positional
parameters, its schemas read from its annotations, and one error code per kind."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from fevex._ground.names import is_valid_name
from fevex.errors import FevexConfigurationError
from fevex.schemas.schema_check import check_schema

__all__ = ["DurableFunctionKind"]

FunctionT = TypeVar("FunctionT")
DefinitionT = TypeVar("DefinitionT")


@dataclass(frozen=True, slots=True)
class DurableFunctionKind:
    """One kind of durable-function definition, as its errors name it: ``code``
    (``INVALID_WORKFLOW``), ``noun`` (``Workflow``) and ``parameters`` (``(step, input)``)."""

    code: str
    noun: str
    parameters: str

    def invalid(self, message: str) -> FevexConfigurationError:
        return FevexConfigurationError(self.code, message)

    def check_identity(self, name: Any, version: Any, run: Any) -> None:
        """Refuse a name models and stores cannot carry, an empty version, and a
        function that is not ``async``."""
        if not is_valid_name(name):
            raise self.invalid(f"{self.noun} name {name!r} must match [A-Za-z0-9_-]{{1,64}}.")
        if not isinstance(version, str) or not version:
            raise self.invalid(f"{self.noun} {name}: version must be a non-empty string.")
        if not callable(run) or not inspect.iscoroutinefunction(run):
            raise self.invalid(
                f"{self.noun} {name}: run must be an async function {self.parameters}."
            )

    def annotated_schemas(self, function: Callable[..., Any], name: str) -> tuple[Any, Any]:
        """The input and output schemas the annotations give (``None``: any JSON)."""
        if not callable(function):
            raise self.invalid(
                f"{self.noun} {name!r}: define_{self.noun.lower()} needs an async function."
            )
        try:
            signature = inspect.signature(function)
            hints = typing.get_type_hints(function, include_extras=True)
        except (TypeError, ValueError, NameError) as error:
            raise self.invalid(f"{self.noun} {name}: cannot read the signature: {error}") from None
        positional = [
            p
            for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if len(positional) != 2:
            raise self.invalid(
                f"{self.noun} {name}: the function takes {self.parameters}, not "
                f"{len(positional)} positional parameters."
            )
        input_hint = hints.get(positional[1].name)
        output_hint = hints.get("return")
        return (
            None if input_hint is Any else input_hint,
            None if output_hint in (None, type(None), Any) else output_hint,
        )

    def check_schemas(self, name: str, schemas: Iterable[tuple[str, Any]]) -> None:
        """Compile each ``(what, schema)`` given, so a schema fevex cannot validate with is
        refused where the definition is made."""
        for what, schema in schemas:
            if schema is not None:
                check_schema(schema, self.code, f"{self.noun} {name}: {what}")

    @staticmethod
    def define(
        run: FunctionT | None, build: Callable[[FunctionT], DefinitionT]
    ) -> DefinitionT | Callable[[FunctionT], DefinitionT]:
        """The definition of ``run``, or with ``run=None`` the decorator that builds it."""
        return build if run is None else build(run)
