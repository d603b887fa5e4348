"""Agent families (DESIGN §12): versions of an agent's state kept as one record, new
versions made as candidates (``create``, ``fork``, ``merge``) and made active only by an
explicit ``promote`` against the revision and active version the caller saw."""

from fevex.kits.family.definition import AgentFamily, FamilyApp, define_agent_family
from fevex.kits.family.versions import Family, FamilyMerge, FamilyVersion

__all__ = [
    "AgentFamily",
    "Family",
    "FamilyApp",
    "FamilyMerge",
    "FamilyVersion",
    "define_agent_family",
]
