"""A tool's exception never carries a credential it resolved out of the run: not in the
``FevexRunError`` the caller gets, its ``__cause__``/``__context__`` chain, nor any formatted
traceback of it; the exception as raised reaches only the app's ``on_tool_exception`` hook."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import (
    FevexConfigurationError,
    FevexRunError,
    ToolContext,
    ToolRetry,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel
from fevex.tools.redaction import secret_spellings

pytestmark = pytest.mark.anyio

# Quotes and a backslash: its repr and JSON spellings differ from the raw text.
SECRET = "sk-\\q'u\"ote-SENTINEL-4d2e91"
SPELLINGS = sorted(secret_spellings(SECRET))


class Query(BaseModel):
    account_id: int


def _plain(token: str) -> Exception:
    return ValueError(f"bad {token}")


def _key(token: str) -> Exception:
    return KeyError(token)  # its str() is the repr


def _json(token: str) -> Exception:
    return ValueError(json.dumps({"authorization": token}))


def _timeout(token: str) -> Exception:
    return TimeoutError(f"upstream timed out for key {token}")


def _chained(token: str) -> Exception:
    try:
        raise ConnectionError(f"refused {token!r}")
    except ConnectionError as inner:
        try:
            raise LookupError("while looking up") from inner
        except LookupError:
            # Implicitly chained too: __context__ of the error raised.
            return RuntimeError(f"gave up on {token}")


def _noted(token: str) -> Exception:
    error = ValueError("bad key")
    error.add_note(f"the key was {token}")
    return error


def _attribute(token: str) -> Exception:
    error = PermissionError("refused")
    error.request_headers = {"Authorization": f"Bearer {token}"}  # type: ignore[attr-defined]
    return error


def _fevex_error(token: str) -> Exception:
    try:
        raise OSError(f"socket said {token}")
    except OSError as inner:
        error = FevexRunError(
            "REMOTE_REFUSED", f"server said: bad token {token!r}", details={"sent": token}
        )
        error.__cause__ = inner
        return error


def _tool_retry(token: str) -> Exception:
    return ToolRetry(f"key {token} was refused; try another account")


EXCEPTIONS: dict[str, Callable[[str], Exception]] = {
    "plain": _plain,
    "key_error": _key,
    "json": _json,
    "timeout": _timeout,
    "chained": _chained,
    "note": _noted,
    "attribute": _attribute,
    "fevex_error": _fevex_error,
    "tool_retry": _tool_retry,
}


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo = [error]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo.extend(e for e in (item.__cause__, item.__context__) if e is not None)


def _everything_said(error: BaseException) -> str:
    """Every text the error can show: its traceback as printed and as logged, and the
    message, repr, args, notes and attributes of each exception in its chain."""
    said = ["".join(traceback.format_exception(error))]
    stream = io.StringIO()
    logger = logging.getLogger("test.tool_exception_credentials")
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        logger.error("the run failed", exc_info=error)
    finally:
        logger.removeHandler(handler)
    said.append(stream.getvalue())
    for item in _chain(error):
        said += [str(item), repr(item), repr(item.args), repr(getattr(item, "__notes__", None))]
        said.append(repr(vars(item)) if hasattr(item, "__dict__") else "")
    return "\n".join(said)


def _app(tool: Any, hook: Any = None) -> Any:
    return create_fevex(
        models={
            "default": FakeModel(
                {"tool_calls": [{"id": "c1", "name": tool.name, "input": {"account_id": 7}}]},
                {"output": "never"},
            )
        },
        agents=[
            define_agent(
                name="support",
                instructions="Help.",
                tools=[tool.name],
                limits={"max_tool_retries": 0},
            )
        ],
        tools=[tool],
        credentials={"api": SECRET},
        run_store=InMemoryRunStore(),
        on_tool_exception=hook,
    )


def _async_tool(make: Callable[[str], Exception], raised: list[Exception]) -> Any:
    @define_tool(name="lookup", description="Look up.", credentials=["api"])
    async def lookup(query: Query, context: ToolContext) -> Any:
        error = make(await context.get_credential("api"))
        raised.append(error)
        raise error

    return lookup


def _sync_tool(
    make: Callable[[str], Exception], raised: list[Exception], loop: asyncio.AbstractEventLoop
) -> Any:
    @define_tool(name="lookup", description="Look up.", credentials=["api"])
    def lookup(query: Query, context: ToolContext) -> Any:
        # A sync tool runs in a worker thread: it resolves through the run's loop.
        token = asyncio.run_coroutine_threadsafe(context.get_credential("api"), loop).result()
        error = make(token)
        raised.append(error)
        raise error

    return lookup


@pytest.mark.parametrize("kind", ["async", "sync"])
@pytest.mark.parametrize("exception", sorted(EXCEPTIONS))
async def test_the_error_a_caller_gets_holds_no_spelling_of_the_credential(
    kind: str, exception: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    raised: list[Exception] = []
    make = EXCEPTIONS[exception]
    if kind == "async":
        tool = _async_tool(make, raised)
    else:
        tool = _sync_tool(make, raised, asyncio.get_running_loop())
    seen: list[tuple[Exception, ToolContext]] = []
    app = _app(tool, hook=lambda error, context: seen.append((error, context)))
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("support", "go")
    error = caught.value
    assert error.code in {"TOOL_FAILED", "REMOTE_REFUSED"}
    said = _everything_said(error)
    assert "Traceback" in said
    leaked = [spelling for spelling in SPELLINGS if spelling in said]
    assert leaked == [], said
    assert not [spelling for spelling in SPELLINGS if spelling in caplog.text]
    (run,) = await app.list_runs()
    stored = json.dumps([run.error, *(e.payload for e in await app.list_events(run.id))])
    assert not [spelling for spelling in SPELLINGS if spelling in stored]
    # The exception as the tool raised it, credential and chain intact, reached the hook.
    (original,) = raised
    ((hooked, context),) = seen
    assert hooked is original
    assert (context.tool_name, context.tool_call_id, context.run_id) == ("lookup", "c1", run.id)
    assert [spelling for spelling in SPELLINGS if spelling in _everything_said(original)]
    await app.close()


async def test_without_a_credential_the_cause_stays_chained() -> None:
    @define_tool(name="lookup", description="Look up.")
    async def lookup(query: Query) -> Any:
        raise KeyError("missing-field")

    app = _app(lookup)
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("support", "go")
    assert isinstance(caught.value.__cause__, KeyError)
    await app.close()


async def test_a_failing_hook_is_logged_by_type_and_the_run_fails_as_it_would(
    caplog: pytest.LogCaptureFixture,
) -> None:
    raised: list[Exception] = []

    def hook(error: Exception, context: ToolContext) -> None:
        raise RuntimeError(f"hook saw {error}")

    app = _app(_async_tool(_plain, raised), hook=hook)
    with caplog.at_level(logging.WARNING, logger="fevex"), pytest.raises(FevexRunError) as caught:
        await app.run_agent("support", "go")
    assert caught.value.code == "TOOL_FAILED"
    assert "on_tool_exception raised RuntimeError" in caplog.text
    assert not [spelling for spelling in SPELLINGS if spelling in caplog.text]
    await app.close()


def test_a_hook_that_is_not_callable_is_refused() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_fevex(on_tool_exception="print")  # type: ignore[arg-type]
    assert caught.value.code == "INVALID_CONFIG"
