"""Record real model exchanges once, replay them in tests without a network.

``record_model(gateway, path)`` wraps any model gateway: each model step streams through
unchanged and is written to a JSON cassette as one exchange (the model input's digest, the
input itself, the streamed events, and a fevex error the step ended with).
``replay_model(path)`` is a gateway that answers the same inputs with the same events, in
the order they were recorded, and fails with ``CASSETTE_MISMATCH``, naming the step and
where its input differs, when an input no longer matches.

A cassette holds what the model saw, never how it was reached: a gateway's API key, base
URL and headers are not in a :class:`~fevex.models.ModelInput`, and model options or
provider state under a key that names a secret (``api_key``, ``authorization``,
``extra_headers``, ``password``, ``..._token``, ``sessionToken``...), at any depth, are
kept as ``"[redacted]"``: in the input and its digest, so that replays match whatever key
a run is given, and in the provider state a step returned, which a replay hands back
redacted (the next step's input, redacted again, still matches).
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from fevex._ground.canonical_json import canonical_json, json_digest
from fevex.errors import FevexError, FevexRunError
from fevex.models import (
    BlockStarted,
    BlockStopped,
    Completed,
    ModelGateway,
    ModelInput,
    ModelResult,
    ModelStreamEvent,
    OutputDelta,
    ToolCall,
    ToolInputDelta,
    Usage,
)
from fevex.tools.redaction import REDACTED

__all__ = ["ModelRecorder", "ModelReplay", "model_input_json", "record_model", "replay_model"]

CASSETTE_FORMAT = 1
_SECRET_KEY = re.compile(
    r"authorization|api_?key|secret|passw(or)?d|credential|cookie|header|bearer|private_key"
    r"|(^|_)(auth|token|access_token|refresh_token|id_token)$"
)
_CAMEL_HUMP = re.compile(r"([a-z0-9])([A-Z])")


def record_model(gateway: ModelGateway, path: str | Path) -> ModelRecorder:
    """Wrap ``gateway`` so that every exchange is written to the cassette at ``path``,
    which starts anew (its folder is created)."""
    return ModelRecorder(gateway, path)


def replay_model(path: str | Path) -> ModelReplay:
    """A gateway answering from the cassette at ``path``; ``CASSETTE_NOT_FOUND`` when there
    is none, ``CASSETTE_INVALID`` when it is not one."""
    return ModelReplay(path)


def model_input_json(model_input: ModelInput) -> dict[str, Any]:
    """What a cassette keeps of a model input, and what its digest is computed from."""
    return {
        "messages": [message.to_json() for message in model_input.messages],
        "tools": [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in model_input.tools
        ],
        "output_schema": model_input.output_schema,
        "max_output_tokens": model_input.max_output_tokens,
        "options": _without_secrets(dict(model_input.options)),
        "provider_state": _without_secrets(model_input.provider_state),
    }


class ModelRecorder:
    """A model gateway that streams through ``gateway`` and records each exchange."""

    def __init__(self, gateway: ModelGateway, path: str | Path) -> None:
        if not callable(getattr(gateway, "stream", None)):
            raise FevexRunError(
                "INVALID_ARGUMENT", f"record_model needs a model gateway, not {gateway!r}."
            )
        self.gateway = gateway
        self.path = Path(path)
        self.exchanges: list[dict[str, Any]] = []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write()

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        recorded_input = _checked_json(model_input_json(input), "the model input")
        events: list[dict[str, Any]] = []
        exchange: dict[str, Any] = {
            "input_digest": json_digest(recorded_input),
            "input": recorded_input,
            "events": events,
        }
        stream = self.gateway.stream(input)
        try:
            iterator = stream.__aiter__()
            while True:
                try:
                    event = await iterator.__anext__()
                except StopAsyncIteration:
                    break
                except FevexError as error:
                    exchange["error"] = {
                        "code": error.code,
                        "message": error.message,
                        "category": error.category,
                        "recoverable": error.recoverable,
                    }
                    self._add(exchange)
                    raise
                events.append(_event_json(event))
                yield event
        finally:
            aclose = getattr(stream, "aclose", None)
            if callable(aclose):
                await aclose()
        # A step its consumer abandoned, or that failed outside fevex's errors, is not
        # recorded: it would replay as an answer the model never finished.
        self._add(exchange)

    async def aclose(self) -> None:
        """Close the wrapped gateway, when it can be closed."""
        aclose = getattr(self.gateway, "aclose", None)
        if callable(aclose):
            await aclose()

    def _add(self, exchange: dict[str, Any]) -> None:
        self.exchanges.append(_checked_json(exchange, "the exchange"))
        self._write()

    def _write(self) -> None:
        text = canonical_json({"format": CASSETTE_FORMAT, "exchanges": self.exchanges}, indent=2)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        temporary.write_text(text + "\n", encoding="utf-8", newline="\n")
        os.replace(temporary, self.path)


class ModelReplay:
    """A model gateway that answers from a cassette. Inputs are matched by digest, each
    recorded exchange answering once, in recorded order among equal inputs."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.exchanges = _read(self.path)
        self.calls = 0
        self._unused: dict[str, deque[int]] = {}
        for index, exchange in enumerate(self.exchanges):
            self._unused.setdefault(exchange["input_digest"], deque()).append(index)

    @property
    def pending(self) -> int:
        """Recorded exchanges not replayed yet."""
        return sum(len(indexes) for indexes in self._unused.values())

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        self.calls += 1
        step = self.calls
        wanted = _checked_json(model_input_json(input), "the model input")
        indexes = self._unused.get(json_digest(wanted))
        if not indexes:
            raise self._mismatch(step, wanted)
        exchange = self.exchanges[indexes.popleft()]
        for event in exchange["events"]:
            yield _event_from_json(event, self.path)
        error = exchange.get("error")
        if error is not None:
            raise FevexRunError(
                str(error["code"]),
                str(error["message"]),
                category=error.get("category", "model"),
                recoverable=bool(error.get("recoverable", False)),
            )

    def _mismatch(self, step: int, wanted: dict[str, Any]) -> FevexRunError:
        digest = json_digest(wanted)
        details: dict[str, Any] = {"step": step, "cassette": str(self.path)}
        if any(exchange["input_digest"] == digest for exchange in self.exchanges):
            why = "its input was recorded, but every recording of it has been replayed already"
        elif not self.exchanges:
            why = "the cassette holds no exchange"
        else:
            # The exchange recorded at the same position is the likeliest to have changed.
            index = min(step, len(self.exchanges)) - 1
            where, was, now = _first_difference(self.exchanges[index]["input"], wanted, "input")
            details.update(exchange=index + 1, difference=where)
            why = (
                f"it matches no recorded input; it differs from exchange {index + 1} at "
                f"{where}: recorded {_brief(was)}, now {_brief(now)}"
            )
        return FevexRunError(
            "CASSETTE_MISMATCH",
            f"Model step {step} replayed from {self.path}: {why}. If the change is intended, "
            "record the cassette again (pytest --fevex-record, or record_model).",
            category="model",
            details=details,
        )


def _without_secrets(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            key: REDACTED if _is_secret(key) else _without_secrets(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_without_secrets(item) for item in value]
    return value


def _is_secret(key: Any) -> bool:
    if not isinstance(key, str):
        return False
    # camelCase is snake_case to the rule: "sessionToken" names a token as "session_token".
    snake = _CAMEL_HUMP.sub(r"\1_\2", key).lower().replace("-", "_")
    return bool(_SECRET_KEY.search(snake))


def _event_json(event: Any) -> dict[str, Any]:
    if isinstance(event, OutputDelta):
        return {"type": "output.delta", "delta": event.delta}
    if isinstance(event, BlockStarted):
        return {
            "type": "block.started",
            "index": event.index,
            "block": event.block,
            "tool_call_id": event.tool_call_id,
            "tool_name": event.tool_name,
        }
    if isinstance(event, ToolInputDelta):
        return {"type": "tool_input.delta", "index": event.index, "delta": event.delta}
    if isinstance(event, BlockStopped):
        return {"type": "block.stopped", "index": event.index}
    if isinstance(event, Completed):
        result = event.result
        return {
            "type": "completed",
            "result": {
                "output": result.output,
                "tool_calls": [
                    {"id": call.id, "name": call.name, "input": call.input}
                    for call in result.tool_calls
                ],
                "usage": result.usage.to_json(),
                "provider_state": _without_secrets(result.provider_state),
                "reasoning": result.reasoning,
                "stop_reason": result.stop_reason,
            },
        }
    raise FevexRunError(
        "CASSETTE_INVALID",
        f"The model streamed a {type(event).__name__}, which is not a model stream event; "
        "it cannot be recorded.",
        category="model",
    )


def _event_from_json(data: Any, path: Path) -> ModelStreamEvent:
    try:
        if data["type"] == "output.delta":
            return OutputDelta(str(data["delta"]))
        if data["type"] == "block.started":
            return BlockStarted(
                int(data["index"]), data["block"], data.get("tool_call_id"), data.get("tool_name")
            )
        if data["type"] == "tool_input.delta":
            return ToolInputDelta(int(data["index"]), str(data["delta"]))
        if data["type"] == "block.stopped":
            return BlockStopped(int(data["index"]))
        if data["type"] == "completed":
            result = data["result"]
            return Completed(
                ModelResult(
                    output=result.get("output"),
                    tool_calls=tuple(
                        ToolCall(str(c["id"]), str(c["name"]), c.get("input"))
                        for c in result.get("tool_calls", ())
                    ),
                    usage=Usage.from_json(result.get("usage")),
                    provider_state=result.get("provider_state"),
                    reasoning=result.get("reasoning"),
                    stop_reason=result.get("stop_reason"),
                )
            )
    except (KeyError, TypeError, AttributeError) as error:
        raise _invalid(path, f"a malformed event ({error!r})") from None
    raise _invalid(path, f"an event of unknown type {data.get('type')!r}")


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FevexRunError(
            "CASSETTE_NOT_FOUND",
            f"There is no cassette at {path}; record it first (pytest --fevex-record, or "
            "record_model).",
            category="model",
            details={"cassette": str(path)},
        ) from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise _invalid(path, f"no JSON ({error})") from None
    if not isinstance(data, dict) or data.get("format") != CASSETTE_FORMAT:
        raise _invalid(path, f"no cassette of format {CASSETTE_FORMAT}")
    exchanges = data.get("exchanges")
    if not isinstance(exchanges, list) or not all(
        isinstance(exchange, dict)
        and isinstance(exchange.get("input_digest"), str)
        and isinstance(exchange.get("events"), list)
        and all(isinstance(event, dict) for event in exchange["events"])
        for exchange in exchanges
    ):
        raise _invalid(path, "malformed exchanges")
    return exchanges


def _first_difference(was: Any, now: Any, where: str) -> tuple[str, Any, Any]:
    """The path of the first place two JSON values differ, and what each holds there."""
    if isinstance(was, dict) and isinstance(now, dict):
        for key in sorted(set(was) | set(now)):
            if key not in was or key not in now:
                return f"{where}.{key}", was.get(key), now.get(key)
            if was[key] != now[key]:
                return _first_difference(was[key], now[key], f"{where}.{key}")
    elif isinstance(was, list) and isinstance(now, list):
        for index, (left, right) in enumerate(zip(was, now, strict=False)):
            if left != right:
                return _first_difference(left, right, f"{where}[{index}]")
        if len(was) != len(now):
            return f"{where} (length)", len(was), len(now)
    return where, was, now


def _checked_json(value: dict[str, Any], what: str) -> dict[str, Any]:
    try:
        return json.loads(canonical_json(value))  # type: ignore[no-any-return]
    except TypeError as error:
        raise FevexRunError(
            "CASSETTE_INVALID",
            f"{what.capitalize()} cannot be recorded as JSON ({error}); a cassette holds JSON "
            "only (provider_state included).",
            category="model",
        ) from None


def _brief(value: Any, limit: int = 80) -> str:
    try:
        text = canonical_json(value)
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _invalid(path: Path, what: str) -> FevexRunError:
    return FevexRunError(
        "CASSETTE_INVALID",
        f"The cassette {path} holds {what}; record it again.",
        category="model",
        details={"cassette": str(path)},
    )
