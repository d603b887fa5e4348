"""A plugin's subcommand, described by the typed ``Command`` of the hook spec: its arguments,
its handler and its exit status reach the ``fevex`` command line, and ``fevex plugins``
names the plugin that added it."""

from __future__ import annotations

import argparse
import json

import pytest

from fevex.cli import main
from fevex.plugins import Command, CommandRegistry, hookimpl, list_plugins, register_plugin

pytestmark = pytest.mark.usefixtures("fresh_plugins")


class GreetPlugin:
    @staticmethod
    def _arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--who", default="world")

    @staticmethod
    def _hello(args: argparse.Namespace) -> int:
        print(f"hello {args.who}")
        return 3

    @hookimpl
    def fevex_register_commands(self, cli: CommandRegistry) -> None:
        cli.add(
            Command(name="hello", help="Say hello.", handler=self._hello, arguments=self._arguments)
        )


def test_a_plugin_command_runs_with_its_arguments_and_exit_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    register_plugin(GreetPlugin(), "greet")

    assert main(["hello", "--who", "fevex"]) == 3
    assert capsys.readouterr().out == "hello fevex\n"


def test_fevex_plugins_names_the_plugin_that_added_the_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    register_plugin(GreetPlugin(), "greet")

    assert main(["plugins"]) == 0
    listed = {plugin["name"]: plugin["commands"] for plugin in json.loads(capsys.readouterr().out)}
    assert listed["greet"] == ["hello"]
    assert listed["fevex"] == ["plugins", "version", "recover", "worker", "eval", "serve"]
    assert [p["commands"] for p in list_plugins() if p["name"] == "greet"] == [["hello"]]


def test_a_command_without_arguments_takes_none(capsys: pytest.CaptureFixture[str]) -> None:
    def ping(args: argparse.Namespace) -> int:
        print("pong")
        return 0

    class Plugin:
        @hookimpl
        def fevex_register_commands(self, cli: CommandRegistry) -> None:
            cli.add(Command(name="ping", help="Answer pong.", handler=ping))

    register_plugin(Plugin(), "ping")

    assert main(["ping"]) == 0
    assert capsys.readouterr().out == "pong\n"
    with pytest.raises(SystemExit) as exited:
        main(["ping", "--who", "x"])
    assert exited.value.code == 2
