"""The stdio server a provider starts: a command, its arguments, its environment and its
working directory, all from the app's own configuration.

Nothing a model or a server says reaches this: the command is fixed when the provider is
created, never run through a shell, and its environment is exactly what the app names.
The parent's environment is not inherited (the MCP SDK's ``stdio_client`` would merge
``HOME``, ``PATH``, ``SHELL``, ``TERM``, ``USER`` and ``LOGNAME`` in; fevex-mcp starts
the process itself so that it does not): the child gets ``env`` plus the parent's
values of the variables named in ``inherit_env``, nothing else.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fevex_mcp.errors import COMMAND_INVALID, configuration_error

__all__ = ["StdioCommand", "parse_command"]

# POSIX names: what a shell would accept, so a typo is caught here and not in the child.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class StdioCommand:
    """A stdio server as the app configured it. ``environment`` is the whole environment
    of the child; ``secrets`` are its values, kept out of every message."""

    command: str
    # Out of any repr: arguments and environment may carry tokens.
    args: tuple[str, ...] = field(repr=False)
    environment: Mapping[str, str] = field(repr=False)
    cwd: str | None
    startup_timeout: float
    call_timeout: float | None

    @property
    def display(self) -> str:
        """The command's name for messages: the program only, never its arguments or
        environment, which may carry a token."""
        return Path(self.command).name

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(value for value in self.environment.values() if value)


def parse_command(
    command: object,
    args: object,
    env: object,
    inherit_env: object,
    cwd: object,
    startup_timeout: object,
    call_timeout: object,
) -> StdioCommand:
    """A checked :class:`StdioCommand`, or ``MCP_COMMAND_INVALID`` naming the problem."""
    if not isinstance(command, str) or not command.strip() or "\x00" in command:
        raise _invalid("command must be the program to start, as a non-empty string.")
    if isinstance(args, str) or not isinstance(args, Iterable):
        raise _invalid("args must be a list of strings (the command is never run by a shell).")
    arguments = tuple(args)
    if not all(isinstance(arg, str) and "\x00" not in arg for arg in arguments):
        raise _invalid("every argument must be a string without NUL.")
    environment: dict[str, str] = {}
    if isinstance(inherit_env, str) or not isinstance(inherit_env, Iterable):
        raise _invalid("inherit_env must be a list of variable names.")
    for name in inherit_env:
        _check_env_name(name)
        value = os.environ.get(name)
        if value is not None:
            environment[name] = value
    if env is not None:
        if not isinstance(env, Mapping):
            raise _invalid("env must be a mapping of variable names to strings.")
        for name, value in env.items():
            _check_env_name(name)
            if not isinstance(value, str) or "\x00" in value:
                raise _invalid(f"the value of env[{name!r}] must be a string without NUL.")
            environment[name] = value
    directory: str | None = None
    if cwd is not None:
        if not isinstance(cwd, str | os.PathLike):
            raise _invalid("cwd must be a path.")
        directory = os.fspath(cwd)
        if not isinstance(directory, str) or not os.path.isdir(directory):
            raise _invalid(f"cwd {directory!r} is not a directory.")
    return StdioCommand(
        command=command,
        args=arguments,
        environment=environment,
        cwd=directory,
        startup_timeout=_seconds("startup_timeout", startup_timeout),
        call_timeout=None if call_timeout is None else _seconds("call_timeout", call_timeout),
    )


def _check_env_name(name: object) -> None:
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise _invalid(f"environment variable name {name!r} is not a valid name.")


def _seconds(what: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise _invalid(f"{what} must be a positive number of seconds.")
    return float(value)


def _invalid(problem: str) -> Exception:
    return configuration_error(COMMAND_INVALID, f"MCP stdio server: {problem}")
