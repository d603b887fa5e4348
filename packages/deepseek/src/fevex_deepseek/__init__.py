"""DeepSeek models for fevex: a profile on fevex-openai's Chat Completions layer."""

from fevex_deepseek.__about__ import __version__
from fevex_deepseek.model import DeepSeekModel
from fevex_deepseek.profile import DEEPSEEK_PROFILE, DEEPSEEK_STRICT_SUBSET
from fevex_deepseek.provider import DEFAULT_BASE_URL, DeepSeekProvider, create_deepseek
from fevex_openai import SchemaPolicy

__all__ = [
    "DEEPSEEK_PROFILE",
    "DEEPSEEK_STRICT_SUBSET",
    "DEFAULT_BASE_URL",
    "DeepSeekModel",
    "DeepSeekProvider",
    "SchemaPolicy",
    "__version__",
    "create_deepseek",
]
