from fevex.knowledge.context_provider import (
    ContextItem,
    ContextProviderDefinition,
    ContextRequest,
    define_context_provider,
)
from fevex.knowledge.in_memory_memory_store import InMemoryMemoryStore
from fevex.knowledge.memory_store import (
    DEFAULT_NAMESPACE,
    Memory,
    MemoryAccess,
    MemoryStore,
    search_terms,
)
from fevex.knowledge.skill import SkillDefinition, define_skill

__all__ = [
    "DEFAULT_NAMESPACE",
    "ContextItem",
    "ContextProviderDefinition",
    "ContextRequest",
    "InMemoryMemoryStore",
    "Memory",
    "MemoryAccess",
    "MemoryStore",
    "SkillDefinition",
    "define_context_provider",
    "define_skill",
    "search_terms",
]
