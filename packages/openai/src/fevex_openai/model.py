"""``OpenAIModel``: a fevex model gateway over the official openai SDK.

One step is one streamed request. Everything fevex can check (owned options, strict
schemas, message parts) is checked before the request is sent. The SDK client is made on
first use in each event loop, since its connections belong to the loop that opened them;
``aclose()`` (or ``async with``) closes the current one.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from fevex.models import Completed, ModelInput, ModelStreamEvent, OutputDelta
from fevex_openai._sdk import load_openai
from fevex_openai.chat_api import ChatStep, build_chat_request
from fevex_openai.error_mapping import error_from_sdk
from fevex_openai.responses_api import ResponsesStep, build_responses_request

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["ClientSettings", "OpenAIApi", "OpenAIModel", "SchemaPolicy"]

SchemaPolicy = Literal["strict", "best-effort"]
OpenAIApi = Literal["responses", "chat"]


@dataclass(frozen=True)
class ClientSettings:
    """How to reach the API. The key is kept out of ``repr``."""

    api_key: str = field(repr=False)
    base_url: str | None = None
    organization: str | None = None
    project: str | None = None
    timeout: float | None = None
    max_retries: int = 0
    default_headers: Mapping[str, str] | None = field(default=None, repr=False)


class OpenAIModel:
    """One OpenAI model, as a fevex :class:`~fevex.models.ModelGateway`.

    Build it with :func:`fevex_openai.create_openai` or name it ``"openai:<model>"``.
    """

    def __init__(
        self,
        model_name: str,
        settings: ClientSettings,
        *,
        schema_policy: SchemaPolicy = "strict",
        api: OpenAIApi = "responses",
    ) -> None:
        load_openai()  # a missing SDK fails here, when the model is built
        self.model_name = model_name
        self.settings = settings
        self.schema_policy: SchemaPolicy = schema_policy
        self.api: OpenAIApi = api
        self._client_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._sdk_client: AsyncOpenAI | None = None

    def __repr__(self) -> str:
        base = f", base_url={self.settings.base_url!r}" if self.settings.base_url else ""
        return (
            f"OpenAIModel({self.model_name!r}, api={self.api!r}, "
            f"schema_policy={self.schema_policy!r}{base})"
        )

    async def stream(self, input: ModelInput) -> AsyncGenerator[ModelStreamEvent, None]:
        """One model step: ``OutputDelta`` events, then one ``Completed``."""
        strict = self.schema_policy == "strict"
        step: ResponsesStep | ChatStep
        if self.api == "responses":
            request = build_responses_request(self.model_name, input, strict=strict)
            step = ResponsesStep(input)
        else:
            request = build_chat_request(self.model_name, input, strict=strict)
            step = ChatStep(input)
        openai = load_openai()
        client = self._client()
        create: Any = (
            client.responses.create if self.api == "responses" else client.chat.completions.create
        )
        try:
            sdk_stream = await create(stream=True, **request)
        except openai.OpenAIError as error:
            raise _mapped(error) from error
        try:
            async for sdk_event in sdk_stream:
                delta = step.accept(sdk_event)
                if delta:
                    yield OutputDelta(delta)
        except openai.OpenAIError as error:
            raise _mapped(error) from error
        finally:
            # Closing the response closes the connection mid-stream: a consumer that stops
            # reading (aclose, cancellation, an error) stops the generation it pays for.
            await sdk_stream.close()
        yield Completed(step.finish())

    def _client(self) -> AsyncOpenAI:
        loop = asyncio.get_running_loop()
        client = self._sdk_client
        if client is None or self._client_loop is None or self._client_loop() is not loop:
            openai = load_openai()
            settings = self.settings
            options: dict[str, Any] = {}
            if settings.timeout is not None:
                options["timeout"] = settings.timeout
            client = openai.AsyncOpenAI(
                api_key=settings.api_key,
                base_url=settings.base_url,
                organization=settings.organization,
                project=settings.project,
                max_retries=settings.max_retries,
                default_headers=settings.default_headers,
                **options,
            )
            self._sdk_client = client
            self._client_loop = weakref.ref(loop)
        return client

    async def aclose(self) -> None:
        """Close the HTTP connections this model holds in the running event loop."""
        client, self._sdk_client = self._sdk_client, None
        loop, self._client_loop = self._client_loop, None
        if client is not None and loop is not None and loop() is asyncio.get_running_loop():
            await client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def _mapped(error: Exception) -> Exception:
    return error_from_sdk(error) or error
