"""``DeepSeekModel``: the fevex model gateway over DeepSeek's streaming Chat Completions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from fevex.errors import FevexConfigurationError
from fevex.models import Completed, ModelInput, ModelStreamEvent, OutputDelta
from fevex_deepseek._sdk import require_openai
from fevex_deepseek.errors import translate_sdk_error
from fevex_deepseek.request import build_chat_request
from fevex_deepseek.stream_assembly import StepAssembler

if TYPE_CHECKING:
    from fevex_deepseek.provider import DeepSeekProvider

__all__ = ["DeepSeekModel"]


class DeepSeekModel:
    """One DeepSeek model (``deepseek-v4-flash``, ...) with its provider's settings."""

    def __init__(self, provider: DeepSeekProvider, model_name: str) -> None:
        if not isinstance(model_name, str) or not model_name.strip():
            raise FevexConfigurationError("INVALID_MODEL", "A DeepSeek model needs a name.")
        # Fail where the model is built, not at its first step, when the SDK is missing.
        require_openai()
        self.provider = provider
        self.model_name = model_name

    def __repr__(self) -> str:
        return f"DeepSeekModel({self.model_name!r}, schema_policy={self.provider.schema_policy!r})"

    async def aclose(self) -> None:
        """Close the provider's connections on the running event loop."""
        await self.provider.aclose()

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        request = build_chat_request(input, self.provider.schema_policy)
        client = self.provider.client(beta=request.beta)
        omit = require_openai().omit
        try:
            chunks = await client.chat.completions.create(
                model=self.model_name,
                messages=cast(Any, request.messages),
                stream=True,
                stream_options={"include_usage": True},
                tools=cast(Any, request.tools) if request.tools else omit,
                response_format={"type": "json_object"} if request.json_output else omit,
                max_tokens=request.max_tokens if request.max_tokens is not None else omit,
                extra_body=request.options or None,
            )
        except Exception as error:
            raise self._translated(error) from None
        assembler = StepAssembler(json_output=request.json_output)
        try:
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as error:
                    raise self._translated(error) from None
                for text in assembler.add(chunk):
                    yield OutputDelta(text)
        finally:
            # Closing the response closes the HTTP stream: DeepSeek sees a cancelled or
            # abandoned step leave instead of generating on for nobody.
            await chunks.close()
        yield Completed(assembler.result(input.provider_state))

    def _translated(self, error: Exception) -> Exception:
        # SDK exceptions hold the request, headers included: they are replaced, not
        # chained, so no traceback can print the API key.
        return translate_sdk_error(error, self.provider.api_key) or error
