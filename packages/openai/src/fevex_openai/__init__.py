"""fevex-openai: OpenAI models for fevex over the official openai SDK.

Importing this package does not import the SDK; building a model does.
"""

from fevex_openai.__about__ import __version__
from fevex_openai.model import OpenAIApi, OpenAIModel, SchemaPolicy
from fevex_openai.provider import OpenAIProvider, create_openai

__all__ = [
    "OpenAIApi",
    "OpenAIModel",
    "OpenAIProvider",
    "SchemaPolicy",
    "__version__",
    "create_openai",
]
