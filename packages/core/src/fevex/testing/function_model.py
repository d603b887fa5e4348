"""A model that is a function: for demos, examples and servers that must answer forever.

:class:`FakeModel` is a finite script, right for a test that expects a known number of
steps; a served app (``fevex serve``, the console, a worker) needs a model that answers
every step it is asked, which ``FunctionModel(fn)`` does by calling ``fn`` each time.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fevex.errors import FevexRunError
from fevex.models import Completed, ModelInput, ModelResult, ModelStreamEvent, OutputDelta

__all__ = ["FunctionModel", "ModelFunction"]

ModelFunction = Callable[[ModelInput], "ModelResult | str | Awaitable[ModelResult | str]"]
# Before each space that follows a word: deltas of a word and the spaces before it, as a
# model writes, which join back into the text exactly.
_WORD_BOUNDARY = re.compile(r"(?<=\S)(?=\s)")


class FunctionModel:
    """A model whose every step is ``fn(model_input)`` (sync or async), returning a
    :class:`~fevex.models.ModelResult` or the answer's text. It is never exhausted.

    The output streams as deltas of ``chunk_size`` characters, or a word at a time when
    ``chunk_size`` is ``None`` (a JSON output streams as its JSON text). An exception
    ``fn`` raises is the step's failure, as a provider's error would be; any other return
    is ``MODEL_CONTRACT_VIOLATION``. Every input is recorded in ``calls``.
    """

    def __init__(self, fn: ModelFunction, *, chunk_size: int | None = None) -> None:
        if not callable(fn):
            raise TypeError("FunctionModel takes a function of the ModelInput")
        if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
            raise ValueError("chunk_size must be a whole number of characters, 1 or more")
        self.fn = fn
        self.chunk_size = chunk_size
        self.calls: list[ModelInput] = []

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        self.calls.append(input)
        answer: Any = self.fn(input)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, str):
            answer = ModelResult(output=answer)
        if not isinstance(answer, ModelResult):
            raise FevexRunError(
                "MODEL_CONTRACT_VIOLATION",
                f"The function of a FunctionModel returned {type(answer).__name__}; return a "
                "ModelResult or the answer's text.",
                category="model",
            )
        output = answer.output
        text = output if isinstance(output, str) or output is None else json.dumps(output)
        for delta in _deltas(text or "", self.chunk_size):
            yield OutputDelta(delta)
        yield Completed(answer)


def _deltas(text: str, chunk_size: int | None) -> list[str]:
    if chunk_size is None:
        return [part for part in _WORD_BOUNDARY.split(text) if part]
    return [text[start : start + chunk_size] for start in range(0, len(text), chunk_size)]
