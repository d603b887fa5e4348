"""DeepSeek models for fevex over the official openai SDK."""

from fevex_deepseek.__about__ import __version__
from fevex_deepseek.model import DeepSeekModel
from fevex_deepseek.provider import DEFAULT_BASE_URL, DeepSeekProvider, create_deepseek
from fevex_deepseek.request import SchemaPolicy

__all__ = [
    "DEFAULT_BASE_URL",
    "DeepSeekModel",
    "DeepSeekProvider",
    "SchemaPolicy",
    "__version__",
    "create_deepseek",
]
