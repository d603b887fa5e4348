"""Team definitions: a durable function that delegates to registered agents, with the
members it may delegate to and the bounds on its delegations."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from fevex.errors import FevexConfigurationError
from fevex.teams.step import TeamFunction, TeamStep
from fevex.workflows.durable_function import DurableFunctionKind

InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")
InputT_co = TypeVar("InputT_co", covariant=True)
OutputT_co = TypeVar("OutputT_co", covariant=True)

__all__ = ["TeamDefinition", "TeamLimits", "TeamMember", "define_team"]

TEAM = DurableFunctionKind("INVALID_TEAM", "Team", "(team, input)")


@dataclass(frozen=True, slots=True)
class TeamMember:
    """A registered agent the team may delegate to, and its ``role`` in the team."""

    agent: str
    role: str = ""


TEAM_LIMITS = (
    "max_delegations",
    "max_parallel",
    "max_depth",
    "max_children",
    "max_concurrent_model_calls",
    "max_model_calls",
)


@dataclass(frozen=True, slots=True)
class TeamLimits:
    """Bounds of one team run (``None``: unbounded): ``max_delegations`` counts every
    delegation the run starts; ``max_parallel`` bounds delegations running at once. As the
    root of a run tree, the tree's bounds too (``max_depth``, ``max_children``,
    ``max_concurrent_model_calls``, ``max_model_calls``: see ``Limits``)."""

    max_delegations: int | None = None
    max_parallel: int | None = None
    max_depth: int | None = None
    max_children: int | None = None
    max_concurrent_model_calls: int | None = None
    max_model_calls: int | None = None

    def check(self, team: str) -> None:
        for name in TEAM_LIMITS:
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 1
            ):
                raise _invalid(f"Team {team}: {name} must be a positive integer or None.")

    def narrowed(self, other: TeamLimits | None) -> TeamLimits:
        """Each bound the smaller of the two: a request can narrow, never widen."""
        if other is None:
            return self
        values: dict[str, int | None] = {}
        for name in TEAM_LIMITS:
            mine, theirs = getattr(self, name), getattr(other, name)
            values[name] = theirs if mine is None else mine if theirs is None else min(mine, theirs)
        return TeamLimits(**values)


@dataclass(frozen=True, slots=True)
class TeamDefinition(Generic[InputT_co, OutputT_co]):
    """A team, generic in its input and output (the annotations of its function):
    ``run(team, input)`` replayed from the start on every resume and recovery,
    delegating to its ``supervisor`` and ``members`` (registered agents, run as they are
    registered). ``version`` names the replay contract, as a workflow's does."""

    name: str
    version: str
    run: TeamFunction
    supervisor: str
    members: tuple[TeamMember, ...]
    limits: TeamLimits = TeamLimits()
    input_schema: Any = None
    output_schema: Any = None

    def check(self) -> None:
        """Raise ``INVALID_TEAM`` when a field holds a value its type does not allow."""
        TEAM.check_identity(self.name, self.version, self.run)
        if not isinstance(self.supervisor, str) or not self.supervisor:
            raise _invalid(f"Team {self.name}: supervisor must be an agent name.")
        if not isinstance(self.members, tuple) or not all(
            isinstance(member, TeamMember) and isinstance(member.agent, str) and member.agent
            for member in self.members
        ):
            raise _invalid(f"Team {self.name}: members must be TeamMember(agent=, role=) values.")
        if not isinstance(self.limits, TeamLimits):
            raise _invalid(f"Team {self.name}: limits must be TeamLimits.")
        self.limits.check(self.name)

    @property
    def key(self) -> tuple[str, str]:
        return self.name, self.version

    @property
    def agents(self) -> frozenset[str]:
        """Every agent the team may delegate to: its supervisor and its members."""
        return frozenset({self.supervisor, *(member.agent for member in self.members)})


def _invalid(message: str) -> FevexConfigurationError:
    return TEAM.invalid(message)


@overload
def define_team(
    *,
    name: str,
    version: str = "1",
    supervisor: str,
    members: Iterable[TeamMember] = (),
    limits: TeamLimits | None = None,
    input_schema: Any = None,
    output_schema: Any = None,
    run: Callable[[TeamStep, InputT], Awaitable[OutputT]],
) -> TeamDefinition[InputT, OutputT]: ...


@overload
def define_team(
    *,
    name: str,
    version: str = "1",
    supervisor: str,
    members: Iterable[TeamMember] = (),
    limits: TeamLimits | None = None,
    input_schema: Any = None,
    output_schema: Any = None,
    run: None = None,
) -> Callable[
    [Callable[[TeamStep, InputT], Awaitable[OutputT]]], TeamDefinition[InputT, OutputT]
]: ...


def define_team(
    *,
    name: str,
    version: str = "1",
    supervisor: str,
    members: Iterable[TeamMember] = (),
    limits: TeamLimits | None = None,
    input_schema: Any = None,
    output_schema: Any = None,
    run: TeamFunction | None = None,
) -> Any:
    """Define a team, as ``@define_team(name=..., supervisor=..., members=[...])`` on
    ``async def f(team, input)`` or as a call with ``run=``. Schemas come from the
    annotations unless given. Whether the agents are registered is checked by
    ``create_fevex`` (``INVALID_TEAM``)."""
    if isinstance(members, (str, bytes)) or not isinstance(members, Iterable):
        raise _invalid(f"Team {name!r}: members must be a list of TeamMember values.")
    listed = tuple(members)
    if limits is not None:
        if not isinstance(limits, TeamLimits):
            raise _invalid(f"Team {name!r}: limits must be TeamLimits.")
        limits.check(name)

    def build(function: TeamFunction) -> TeamDefinition[Any, Any]:
        input_hint, output_hint = TEAM.annotated_schemas(function, name)
        definition: TeamDefinition[Any, Any] = TeamDefinition(
            name=name,
            version=version,
            run=function,
            supervisor=supervisor,
            members=listed,
            limits=TeamLimits() if limits is None else limits,
            input_schema=input_schema if input_schema is not None else input_hint,
            output_schema=output_schema if output_schema is not None else output_hint,
        )
        definition.check()
        TEAM.check_schemas(
            name,
            (
                ("input_schema", definition.input_schema),
                ("output_schema", definition.output_schema),
            ),
        )
        return definition

    return TEAM.define(run, build)
