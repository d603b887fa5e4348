"""The python examples of the docs, read from their markdown and run as they are written.

Every fenced ``python`` block of ``README.md``, ``packages/*/README.md`` and
``docs/**/*.md`` is named by the HTML comment right before it: ``<!-- example: name -->``
for an example a test runs, ``<!-- fragment: why -->`` for a block that cannot run on its
own (the reason says why). A test module lists its documents (``Documents(...)``), runs
each example under a test marked ``@documents.example(name)``, and asserts that
``documents.unaccounted()`` is empty: no block without a comment, no example no test runs.

An example runs in the test's process, in a namespace of its own, as the script it is:
what it uses without defining (the app's own functions, a model) the test passes in by
name, and a block with top-level ``await`` runs in the test's event loop. An address a
test cannot reach as written (a deployment's host, a path under ``/var``) is replaced by
one of the test's, and must occur in the block. Tracebacks point at the markdown's lines.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]

# The comment before a block, as markdown-it gives it: "<!-- example: name -->\n".
_MARKERS = ("example", "fragment")


@dataclass(frozen=True)
class Block:
    """One fenced python block: where it is, its comment's kind and text, its code."""

    path: Path
    line: int  # of the block's first line of code, from 1
    kind: str | None  # "example", "fragment", or None without a comment
    label: str  # the example's name, or why a fragment cannot run
    code: str

    @property
    def where(self) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"


@dataclass(frozen=True)
class Example:
    """An example block, runnable as written."""

    block: Block

    @property
    def name(self) -> str:
        return self.block.label

    @property
    def code(self) -> str:
        return self.block.code

    def compile(self, addresses: Mapping[str, str] | None = None) -> CodeType:
        code = self.code
        for written, reachable in (addresses or {}).items():
            assert written in code, f"{self.block.where}: {written!r} is not in the example"
            code = code.replace(written, reachable)
        # Blank lines before it, so that line numbers are the markdown file's.
        source = "\n" * (self.block.line - 1) + code
        return compile(
            source,
            str(self.block.path),
            "exec",
            flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
            dont_inherit=True,
        )

    def run(self, *, addresses: Mapping[str, str] | None = None, **names: Any) -> dict[str, Any]:
        """Runs a block without top-level ``await`` and returns its namespace."""
        code = self.compile(addresses)
        assert not code.co_flags & inspect.CO_COROUTINE, (
            f"{self.block.where} awaits: run it with `await example.run_async(...)`"
        )
        namespace = {"__name__": "__main__", **names}
        exec(code, namespace)
        return namespace

    async def run_async(
        self, *, addresses: Mapping[str, str] | None = None, **names: Any
    ) -> dict[str, Any]:
        """Runs a block in the running event loop, awaiting what it awaits at top level,
        and returns its namespace."""
        namespace = {"__name__": "__main__", **names}
        outcome = eval(self.compile(addresses), namespace)
        if inspect.iscoroutine(outcome):
            await outcome
        return namespace


def python_blocks(path: Path) -> list[Block]:
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))
    blocks = []
    for index, token in enumerate(tokens):
        if token.type != "fence" or token.info.strip() != "python":
            continue
        kind, label = None, ""
        before = tokens[index - 1] if index else None
        if before is not None and before.type == "html_block":
            comment = before.content.strip()
            for marker in _MARKERS:
                prefix = f"<!-- {marker}:"
                if comment.startswith(prefix) and comment.endswith("-->"):
                    kind, label = marker, comment[len(prefix) : -len("-->")].strip()
        assert token.map is not None
        blocks.append(Block(path, token.map[0] + 2, kind, label, token.content))
    return blocks


class Documents:
    """The python blocks of some markdown files, and which of their examples tests run."""

    def __init__(self, *paths: Path) -> None:
        self.blocks = [block for path in paths for block in python_blocks(path)]
        self.run_by_tests: set[str] = set()

    def get(self, name: str) -> Example:
        found = [b for b in self.blocks if b.kind == "example" and b.label == name]
        assert len(found) == 1, f"{len(found)} examples are named {name!r}"
        return Example(found[0])

    def example(self, *names: str) -> pytest.MarkDecorator:
        """Marks the test that runs the examples ``names``: it receives them as its
        ``example`` argument (one) or ``examples`` (several, in the given order)."""
        self.run_by_tests.update(names)
        if len(names) == 1:
            return pytest.mark.parametrize("example", [self.get(names[0])], ids=list(names))
        examples = [self.get(name) for name in names]
        return pytest.mark.parametrize("examples", [examples], ids=["+".join(names)])

    def unaccounted(self) -> list[str]:
        """The blocks no test runs: without a comment, or an example no test names."""
        missing = []
        for block in self.blocks:
            if block.kind is None:
                missing.append(f"{block.where}: no <!-- example: ... --> or <!-- fragment: ... -->")
            elif block.kind == "example" and block.label not in self.run_by_tests:
                missing.append(f"{block.where}: no test runs the example {block.label!r}")
            elif not block.label:
                missing.append(f"{block.where}: a fragment must say why it cannot run")
        return missing
