"""Datasets: named lists of cases, written in Python or read from JSON and JSONL files.

A case is an ``id`` unique in its dataset, the ``input`` a run receives, what is
``expected`` of it (``output``, ``tools``, ``forbidden_tools``, and any key a scorer of
your own reads) and free ``metadata``. A file is read whole and checked before any case
runs: a misspelt key or a duplicate id is an error that names the line, never a case
silently scored against nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fevex._ground.canonical_json import canonical_json
from fevex.errors import FevexConfigurationError

__all__ = ["EvalCase", "EvalDataset", "dataset_from_json", "load_dataset"]

_CASE_KEYS = frozenset({"id", "input", "expected", "metadata"})
_TOOL_LISTS = ("tools", "forbidden_tools")


@dataclass(frozen=True, slots=True)
class EvalCase:
    """One case. ``expected`` keys the built-in scorers read: ``output`` (the run's output
    as JSON), ``tools`` (tool names the model should call) and ``forbidden_tools``."""

    id: str
    input: Any
    expected: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EvalDataset:
    name: str
    cases: tuple[EvalCase, ...]
    version: str | None = None


def dataset_from_json(data: Any, *, name: str = "dataset") -> EvalDataset:
    """A dataset from parsed JSON: ``{"name", "version", "cases": [...]}`` or a bare list
    of cases (named ``name``). ``EVAL_DATASET_INVALID`` names what is wrong."""
    return _dataset_from_json(data, name, "")


def load_dataset(path: str | Path) -> EvalDataset:
    """Read a ``.jsonl`` file (one case per line; blank lines are skipped) or a ``.json``
    file (see :func:`dataset_from_json`). The dataset is named after the file unless the
    file names it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _invalid(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise _invalid(f"{path}: cannot be read as UTF-8 text ({error})") from None
    if path.suffix.lower() != ".jsonl":
        return _dataset_from_json(_parsed(text, str(path)), path.stem, f"{path}: ")
    cases = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            where = f"{path}:{number}"
            cases.append(case_from_json(_parsed(line, where), where))
    return checked_dataset(EvalDataset(path.stem, tuple(cases)))


def _dataset_from_json(data: Any, name: str, where: str) -> EvalDataset:
    version = None
    if isinstance(data, dict):
        unknown = set(data) - {"name", "version", "cases"}
        if unknown:
            keys = sorted(unknown)
            raise _invalid(f"{where}unknown dataset keys {keys}; use name, version, cases")
        name = data.get("name", name)
        version = data.get("version")
        data = data.get("cases")
    if not isinstance(data, list):
        raise _invalid(f"{where}a dataset is a list of cases, or an object with a cases list")
    if not isinstance(name, str) or not name:
        raise _invalid(f"{where}the dataset name must be a non-empty string")
    if version is not None and not isinstance(version, str):
        raise _invalid(f"{where}the dataset version must be a string")
    cases = [case_from_json(item, f"{where}case {number}") for number, item in enumerate(data, 1)]
    return checked_dataset(EvalDataset(name, tuple(cases), version))


def case_from_json(data: Any, where: str) -> EvalCase:
    if not isinstance(data, dict):
        raise _invalid(f"{where}: a case is a JSON object with id and input")
    unknown = set(data) - _CASE_KEYS
    if unknown:
        raise _invalid(f"{where}: unknown case keys {sorted(unknown)}; use {sorted(_CASE_KEYS)}")
    if "input" not in data:
        raise _invalid(f"{where}: the case has no input")
    expected, metadata = data.get("expected"), data.get("metadata")
    case = EvalCase(
        id=data.get("id"),  # type: ignore[arg-type]  # checked below
        input=data["input"],
        expected={} if expected is None else expected,
        metadata={} if metadata is None else metadata,
    )
    _check_case(case, where)
    return case


def checked_dataset(
    dataset: EvalDataset | Iterable[EvalCase], name: str = "dataset"
) -> EvalDataset:
    """The dataset, after checking every case (as Python code may build them by hand)."""
    if not isinstance(dataset, EvalDataset):
        dataset = EvalDataset(name, tuple(dataset))
    seen: set[str] = set()
    for index, case in enumerate(dataset.cases):
        where = f"case {index + 1}" if not isinstance(case, EvalCase) else f"case {case.id!r}"
        _check_case(case, where)
        if case.id in seen:
            raise _invalid(f"{where}: the id is used by another case; ids must be unique")
        seen.add(case.id)
    return dataset


def _check_case(case: Any, where: str) -> None:
    if not isinstance(case, EvalCase):
        raise _invalid(f"{where}: {type(case).__name__} is not an EvalCase")
    if not isinstance(case.id, str) or not case.id.strip():
        raise _invalid(f"{where}: the id must be a non-empty string")
    if not isinstance(case.expected, Mapping):
        raise _invalid(f"{where}: expected must be an object")
    if not isinstance(case.metadata, Mapping):
        raise _invalid(f"{where}: metadata must be an object")
    for key in _TOOL_LISTS:
        tools = case.expected.get(key)
        if tools is not None and (
            not isinstance(tools, list | tuple) or not all(isinstance(t, str) for t in tools)
        ):
            raise _invalid(f"{where}: expected.{key} must be a list of tool names")
    try:
        canonical_json({"input": case.input, "expected": dict(case.expected)})
        canonical_json(dict(case.metadata))
    except TypeError as error:
        raise _invalid(f"{where}: not JSON ({error})") from None


def _parsed(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise _invalid(f"{where}: not JSON ({error})") from None
    except RecursionError:
        raise _invalid(f"{where}: nested too deeply") from None


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("EVAL_DATASET_INVALID", f"Dataset: {message}.")
