"""One measurement of ``benchmarks.openapi.run``, in a fresh interpreter.

``python -m benchmarks.openapi.measure DOCUMENT SCENARIO [--trace]`` with a JSON list of
operationIds on standard input; prints one JSON object.

- ``supported``: the operationIds whose provider the plugin accepts (each tried alone);
- ``providers``: the baseline, a first provider of the first operation, then a provider of
  each following one;
- ``full``: one provider of all the operations.
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fevex import FevexConfigurationError, FevexRunError
from fevex_openapi import create_openapi_tool_provider

MIB = 2**20


def main() -> int:
    document, scenario = Path(sys.argv[1]), sys.argv[2]
    trace = "--trace" in sys.argv[3:]
    operations: list[str] = json.loads(sys.stdin.read())
    text = document.read_bytes()
    result: dict[str, Any] = {"bytes": len(text)}

    def provider(allow: list[str], source: bytes = text) -> Any:
        return create_openapi_tool_provider(
            document=source, operations={"allow": allow}, base_url="https://api.example.com"
        )

    if scenario == "supported":
        supported = []
        for operation_id in _operation_ids(text):
            try:
                provider([operation_id])
            except FevexConfigurationError:
                continue
            supported.append(operation_id)
        result["operations"] = supported
    elif scenario == "providers":
        result["operations"] = len(_operation_ids(text))
        gc.collect()
        if not trace:
            started = time.perf_counter()
            json.loads(text)
            result["baseline"] = time.perf_counter() - started
            gc.collect()
        first, *others = operations
        result["first"], result["first_peak"], result["first_retained"] = _step(
            lambda: provider([first]), trace
        )
        steps = [_step(lambda o=o: provider([o]), trace) for o in others]  # type: ignore[misc]
        result["next"] = [s[0] for s in steps]
        result["next_peak"] = [s[1] for s in steps]
        result["next_retained"] = [s[2] for s in steps]
        # The same text in another bytes object (read from the file again): hashed again.
        again = [
            _step(lambda o=o: provider([o], bytes(bytearray(text))), trace)  # type: ignore[misc]
            for o in others[:5]
        ]
        result["next_rehashed"] = [s[0] for s in again]
        if not trace:
            result["first_call"] = [_first_call(provider([o])) for o in others[:5]]
    elif scenario == "full":
        result["full"], result["full_peak"], result["full_retained"] = _step(
            lambda: provider(operations), trace
        )
    result["max_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))
    return 0


def _step(work: Callable[[], Any], trace: bool) -> tuple[float, float, float]:
    """Seconds, peak and retained MiB of ``work()`` (memory only when tracing)."""
    keep: list[Any] = []
    if trace:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    keep.append(work())
    seconds = time.perf_counter() - started
    if not trace:
        return seconds, 0.0, 0.0
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, (peak - before) / MIB, (current - before) / MIB


def _first_call(provider: Any) -> float:
    """Seconds of the first call of the provider's one tool, with an input its schema
    refuses: the engine compiles the input schema (in a worker thread), nothing is sent."""
    (name,) = provider.tool_names.values()

    async def call() -> None:
        try:
            await provider.call_tool(name, {"not-a-group": 1}, None)
        except FevexRunError as error:
            if error.code != "OPENAPI_INPUT_INVALID":
                raise

    started = time.perf_counter()
    asyncio.run(call())
    return time.perf_counter() - started


def _operation_ids(text: bytes) -> list[str]:
    document = json.loads(text)
    return [
        operation["operationId"]
        for item in document["paths"].values()
        for operation in item.values()
        if isinstance(operation, dict) and isinstance(operation.get("operationId"), str)
    ]


if __name__ == "__main__":
    raise SystemExit(main())
