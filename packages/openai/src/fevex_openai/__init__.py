"""fevex-openai: OpenAI models for fevex over the official openai SDK.

Importing this package does not import the SDK; building a model does. OpenAI-compatible
providers build on it: :class:`ProviderProfile` is what such a provider changes in the
Chat Completions layer, :class:`StrictSubset` the JSON Schema its strict mode accepts,
and :func:`check_base_url` the configuration check every provider applies to its URL.
"""

from fevex_openai.__about__ import __version__
from fevex_openai.base_url import check_base_url
from fevex_openai.model import ClientSettings, OpenAIApi, OpenAIModel, SchemaPolicy
from fevex_openai.profile import OPENAI_PROFILE, ProviderProfile
from fevex_openai.provider import OpenAIProvider, create_openai
from fevex_openai.strict_schema import check_strict_schema
from fevex_openai.strict_subset import OPENAI_STRICT_SUBSET, StrictSubset

__all__ = [
    "OPENAI_PROFILE",
    "OPENAI_STRICT_SUBSET",
    "ClientSettings",
    "OpenAIApi",
    "OpenAIModel",
    "OpenAIProvider",
    "ProviderProfile",
    "SchemaPolicy",
    "StrictSubset",
    "__version__",
    "check_base_url",
    "check_strict_schema",
    "create_openai",
]
