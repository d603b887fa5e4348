"""``DeepSeekModel``: fevex-openai's Chat Completions gateway with DeepSeek's profile."""

from __future__ import annotations

from fevex_deepseek.profile import DEEPSEEK_PROFILE
from fevex_openai import ClientSettings, OpenAIModel, SchemaPolicy

__all__ = ["DeepSeekModel"]


class DeepSeekModel(OpenAIModel):
    """One DeepSeek model (``deepseek-v4-flash``, ...), as a fevex model gateway.

    Build it with :func:`fevex_deepseek.create_deepseek` or name it
    ``"deepseek:<model>"``. ``await model.aclose()`` (or ``async with model:``) closes its
    connections on the running event loop.
    """

    def __init__(
        self, model_name: str, settings: ClientSettings, *, schema_policy: SchemaPolicy = "strict"
    ) -> None:
        super().__init__(
            model_name, settings, schema_policy=schema_policy, api="chat", profile=DEEPSEEK_PROFILE
        )
