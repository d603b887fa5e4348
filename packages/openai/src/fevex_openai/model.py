"""``OpenAIModel``: a fevex model gateway over the official openai SDK.

One step is one streamed request. Everything fevex can check (owned options, strict
schemas, message parts) is checked before the request is sent. The SDK client is made on
first use in each event loop, since its connections belong to the loop that opened them;
``aclose()`` (or ``async with``) closes the current one. An OpenAI-compatible provider
(DeepSeek, ...) is this gateway over Chat Completions with its own
:class:`~fevex_openai.profile.ProviderProfile`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from fevex.errors import FevexError
from fevex.models import Completed, ModelInput, ModelStreamEvent, OutputDelta
from fevex_openai._sdk import load_openai
from fevex_openai.chat_api import ChatStep, build_chat_request, uses_strict_tools
from fevex_openai.error_mapping import error_from_sdk, without_key
from fevex_openai.profile import OPENAI_PROFILE, ProviderProfile
from fevex_openai.responses_api import ResponsesStep, build_responses_request

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["ClientSettings", "OpenAIApi", "OpenAIModel", "SchemaPolicy"]

SchemaPolicy = Literal["strict", "best-effort"]
OpenAIApi = Literal["responses", "chat"]


@dataclass(frozen=True)
class ClientSettings:
    """How to reach the API. The key is kept out of ``repr``.

    ``strict_tools_base_url``, where set, serves the Chat Completions steps that offer
    strict tools (DeepSeek's ``/beta``); other steps go to ``base_url``.
    """

    api_key: str = field(repr=False)
    base_url: str | None = None
    strict_tools_base_url: str | None = None
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
        profile: ProviderProfile = OPENAI_PROFILE,
    ) -> None:
        """``profile`` is the provider's rules for Chat Completions (``api="chat"``); the
        Responses API is OpenAI's own and always follows OpenAI's."""
        load_openai(profile)  # a missing SDK fails here, when the model is built
        self.model_name = model_name
        self.settings = settings
        self.schema_policy: SchemaPolicy = schema_policy
        self.api: OpenAIApi = api
        self.profile = profile
        self._client_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._sdk_clients: tuple[AsyncOpenAI, AsyncOpenAI] | None = None

    def __repr__(self) -> str:
        base = f", base_url={self.settings.base_url!r}" if self.settings.base_url else ""
        return (
            f"{type(self).__name__}({self.model_name!r}, api={self.api!r}, "
            f"schema_policy={self.schema_policy!r}{base})"
        )

    async def stream(self, input: ModelInput) -> AsyncGenerator[ModelStreamEvent, None]:
        """One model step: a ``text`` block (``BlockStarted``, ``OutputDelta`` events,
        ``BlockStopped``) around the visible output, a ``tool_use`` block (with
        ``ToolInputDelta`` fragments) per tool call, then one ``Completed``."""
        failure: Exception | None = None
        events = self._step_events(input)
        async with contextlib.aclosing(events):
            try:
                async for event in events:
                    yield event
            except Exception as error:
                failure = self._failure(error)
        if failure is not None:
            # Raised here, outside the handler: the error has no __context__, and its
            # traceback does not reach the frames that held the SDK's request and events.
            raise failure

    async def _step_events(self, input: ModelInput) -> AsyncGenerator[ModelStreamEvent, None]:
        strict = self.schema_policy == "strict"
        step: ResponsesStep | ChatStep
        if self.api == "responses":
            request = build_responses_request(self.model_name, input, strict=strict)
            step = ResponsesStep(input)
            create: Any = self._client(strict_tools=False).responses.create
        else:
            request = build_chat_request(
                self.model_name, input, strict=strict, profile=self.profile
            )
            step = ChatStep(input, self.profile)
            client = self._client(strict_tools=uses_strict_tools(request))
            create = client.chat.completions.create
        sdk_stream = await create(stream=True, **request)
        try:
            async for sdk_event in sdk_stream:
                delta = step.accept(sdk_event)
                for event in step.drain():  # block bounds and tool-call argument fragments
                    yield event
                if delta:
                    yield OutputDelta(delta)
        finally:
            # Closing the response closes the connection mid-stream: a consumer that stops
            # reading (aclose, cancellation, an error) stops the generation it pays for.
            await sdk_stream.close()
        yield Completed(step.finish())

    def _failure(self, error: Exception) -> Exception:
        """The exception a failed step raises in place of ``error``.

        SDK exceptions hold the request, headers included, and the provider's words; fevex's
        own errors may quote those words (an error event in the stream). Either way the
        caller gets a fevex error with the key scrubbed from its text, and no exception or
        frame that held the SDK's objects. Any other exception (a fault in fevex's code) is
        raised as it was, with the traceback that debugs it.
        """
        failure = error if isinstance(error, FevexError) else error_from_sdk(error, self.profile)
        if failure is None:
            return error
        return without_key(failure, self.settings.api_key)

    def _client(self, *, strict_tools: bool) -> AsyncOpenAI:
        loop = asyncio.get_running_loop()
        clients = self._sdk_clients
        if clients is None or self._client_loop is None or self._client_loop() is not loop:
            openai = load_openai(self.profile)
            settings = self.settings
            options: dict[str, Any] = {}
            if settings.timeout is not None:
                options["timeout"] = settings.timeout
            headers: dict[str, Any] = dict(settings.default_headers or {})
            if not self.profile.openai_environment:
                headers = {
                    **_without_openai_environment(settings.api_key, openai.Omit()),
                    **headers,
                }
            regular = openai.AsyncOpenAI(
                api_key=settings.api_key,
                base_url=settings.base_url,
                organization=settings.organization,
                project=settings.project,
                max_retries=settings.max_retries,
                default_headers=headers or None,
                **options,
            )
            # The strict-tools client shares the regular one's connection pool.
            strict = (
                regular.with_options(base_url=settings.strict_tools_base_url)
                if settings.strict_tools_base_url
                else regular
            )
            clients = (regular, strict)
            self._sdk_clients = clients
            self._client_loop = weakref.ref(loop)
        return clients[1] if strict_tools else clients[0]

    async def aclose(self) -> None:
        """Close the HTTP connections this model holds in the running event loop."""
        clients, self._sdk_clients = self._sdk_clients, None
        loop, self._client_loop = self._client_loop, None
        if clients is not None and loop is not None and loop() is asyncio.get_running_loop():
            await clients[0].close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def _without_openai_environment(api_key: str, omit: Any) -> dict[str, Any]:
    """Headers that keep the OpenAI settings of the environment away from another provider.

    The SDK adds ``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID`` and ``OPENAI_CUSTOM_HEADERS``
    (an ``Authorization`` line included) to every client it builds; a process that also
    talks to OpenAI must not send those, nor an OpenAI credential, to another provider.
    ``omit`` values remove a header; an explicit ``Authorization`` makes the SDK drop the
    environment's.
    """
    headers: dict[str, Any] = {"OpenAI-Organization": omit, "OpenAI-Project": omit}
    for line in os.environ.get("OPENAI_CUSTOM_HEADERS", "").split("\n"):
        name, colon, _ = line.partition(":")
        if colon and name.strip() and name.strip().lower() != "authorization":
            headers[name.strip()] = omit
    headers["Authorization"] = f"Bearer {api_key}"
    return headers
