"""Knowledge publication (DESIGN §12): candidates anyone may propose, an official document
set changed only by an authorized publication in one compare-and-swap, and a context
provider that gives agents the official set only."""

from fevex.kits.publication.definition import (
    KnowledgePublication,
    PublicationApp,
    define_knowledge_publication,
)
from fevex.kits.publication.documents import KnowledgeDocument, RequiredRead, SourceReference
from fevex.kits.publication.record import (
    Candidate,
    PublicationReceipt,
    PublicationState,
    PublishedDocument,
)

__all__ = [
    "Candidate",
    "KnowledgeDocument",
    "KnowledgePublication",
    "PublicationApp",
    "PublicationReceipt",
    "PublicationState",
    "PublishedDocument",
    "RequiredRead",
    "SourceReference",
    "define_knowledge_publication",
]
