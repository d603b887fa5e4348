"""An agent family as it is stored and read: one JSON record holding every version and the
active one, and the rules that derive the next record from it (pure functions, no I/O).

A version is a ``candidate`` until it is promoted to ``active``; the version it replaced
becomes ``retired``. ``parent_ids`` is its real lineage (one parent for a fork, the
target then the source for a merge, none for the first version), ``base_id`` the version
that was active when it was made (``None``: none was): only a candidate whose base is still
the active version is promoted, so that a candidate decided against one active version is
never promoted over another. A version that is not active expires ``retention`` seconds
after it became what it is (made, or retired) and is dropped at the family's next change;
the active version never expires. ``max_versions`` bounds what the record keeps: a new
version first makes room by dropping expired, then the oldest retired, versions, and is
refused (``FAMILY_FULL``) when only candidates and the active version are left.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fevex.errors import FevexRunError

__all__ = ["Family", "FamilyMerge", "FamilyVersion"]

VersionStatus = Literal["candidate", "active", "retired"]


@dataclass(frozen=True, slots=True)
class FamilyVersion:
    """One version of a family: its id, status, JSON ``state``, the exported run
    checkpoint it carries (``None``: none), its lineage and its instants (ISO 8601 UTC;
    ``expires_at`` is ``None`` for the active version)."""

    id: str
    status: VersionStatus
    state: Any
    parent_ids: tuple[str, ...]
    base_id: str | None
    created_at: str
    expires_at: str | None
    checkpoint: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "state": self.state,
            "parent_ids": list(self.parent_ids),
            "base_id": self.base_id,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "checkpoint": self.checkpoint,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FamilyVersion:
        return cls(
            str(data["id"]),
            data["status"],
            data["state"],
            tuple(str(each) for each in data["parent_ids"]),
            data["base_id"],
            str(data["created_at"]),
            data["expires_at"],
            data.get("checkpoint"),
        )


@dataclass(frozen=True, slots=True)
class Family:
    """A family as read: its ``revision`` (pass it back to ``promote``; every change
    raises it by one), the ``active_id`` (``None`` until a version is promoted) and its
    versions in the order they were made. Callbacks are given copies: changing one
    changes nothing stored."""

    id: str
    name: str
    revision: int
    active_id: str | None
    versions: tuple[FamilyVersion, ...]
    created_at: str
    updated_at: str

    @property
    def active(self) -> FamilyVersion | None:
        """The active version, if one was promoted."""
        return None if self.active_id is None else self.version(self.active_id)

    @property
    def newest(self) -> FamilyVersion:
        """The version made last (the one ``create``, ``fork`` or ``merge`` returned)."""
        return self.versions[-1]

    @property
    def candidates(self) -> tuple[FamilyVersion, ...]:
        return tuple(v for v in self.versions if v.status == "candidate")

    def version(self, version_id: str) -> FamilyVersion:
        """The version ``version_id``; ``FAMILY_VERSION_NOT_FOUND`` when the family has
        none (never made, rejected or expired)."""
        for version in self.versions:
            if version.id == version_id:
                return version
        raise FevexRunError(
            "FAMILY_VERSION_NOT_FOUND",
            f"Family {self.id} has no version {version_id!r} (never made, rejected or expired).",
            details={"family_id": self.id, "version_id": version_id},
        )

    def to_json(self) -> dict[str, Any]:
        """The stored record (without its revision, which the store keeps)."""
        return {
            "family": self.name,
            "id": self.id,
            "active_id": self.active_id,
            "versions": [version.to_json() for version in self.versions],
            "created_at": self.created_at,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], revision: int, updated_at: str) -> Family:
        try:
            return cls(
                str(data["id"]),
                str(data["family"]),
                revision,
                data["active_id"],
                tuple(FamilyVersion.from_json(each) for each in data["versions"]),
                str(data["created_at"]),
                updated_at,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise FevexRunError(
                "FAMILY_RECORD_INVALID",
                f"The stored record of family {data.get('id')!r} cannot be read "
                f"({type(error).__name__}); it was not written by this kit.",
            ) from None


@dataclass(frozen=True, slots=True)
class FamilyMerge:
    """What the app's three-way ``merge(base, target, source)`` returns: the merged
    ``state``, or the ``conflicts`` (names of what could not be merged) that refuse the
    merge (``FAMILY_MERGE_CONFLICT``, nothing written)."""

    state: Any = None
    conflicts: tuple[str, ...] = field(default_factory=tuple)


def instant(seconds: float) -> str:
    """``seconds`` since the epoch as fevex writes instants (ISO 8601 UTC, microseconds)."""
    whole = int(seconds)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    return f"{text}.{int((seconds - whole) * 1_000_000):06d}Z"


def live(family: Family, now: str) -> Family:
    """``family`` without the versions that expired by ``now``."""
    kept = tuple(v for v in family.versions if v.expires_at is None or v.expires_at > now)
    if len(kept) == len(family.versions):
        return family
    return _replace_versions(family, kept)


def with_room(family: Family, max_versions: int) -> Family:
    """``family`` with room for one more version: its oldest retired versions dropped as
    needed; ``FAMILY_FULL`` when candidates and the active version fill it."""
    versions = list(family.versions)
    while len(versions) >= max_versions:
        retired = next((v for v in versions if v.status == "retired"), None)
        if retired is None:
            raise FevexRunError(
                "FAMILY_FULL",
                f"Family {family.id} keeps at most {max_versions} versions and holds only "
                "candidates and its active version; promote or reject a candidate first.",
                details={"family_id": family.id, "max_versions": max_versions},
            )
        versions.remove(retired)
    return _replace_versions(family, tuple(versions))


def common_base(family: Family, target: str, source: str) -> str | None:
    """The nearest version both ``target`` and ``source`` descend from (either of them
    counts), among the versions the family still keeps; ``None`` when they share none."""
    parents = {v.id: v.parent_ids for v in family.versions}

    def ancestry(start: str) -> list[str]:
        order, frontier, seen = [], [start], {start}
        while frontier:
            following = []
            for each in frontier:
                order.append(each)
                for parent in parents.get(each, ()):
                    if parent not in seen and parent in parents:
                        seen.add(parent)
                        following.append(parent)
            frontier = following
        return order

    of_source = set(ancestry(source))
    return next((each for each in ancestry(target) if each in of_source), None)


def promoted(family: Family, candidate_id: str, retired_until: str) -> Family:
    """``family`` with ``candidate_id`` active and the version it replaces retired (kept
    until ``retired_until``)."""
    versions = []
    for version in family.versions:
        if version.id == candidate_id:
            version = _changed(version, status="active", expires_at=None)
        elif version.id == family.active_id:
            version = _changed(version, status="retired", expires_at=retired_until)
        versions.append(version)
    return Family(
        family.id,
        family.name,
        family.revision,
        candidate_id,
        tuple(versions),
        family.created_at,
        family.updated_at,
    )


def without(family: Family, version_id: str) -> Family:
    return _replace_versions(family, tuple(v for v in family.versions if v.id != version_id))


def with_version(family: Family, version: FamilyVersion) -> Family:
    return _replace_versions(family, (*family.versions, version))


def _replace_versions(family: Family, versions: tuple[FamilyVersion, ...]) -> Family:
    return Family(
        family.id,
        family.name,
        family.revision,
        family.active_id,
        versions,
        family.created_at,
        family.updated_at,
    )


def _changed(version: FamilyVersion, **changes: Any) -> FamilyVersion:
    data = {**version.to_json(), **changes}
    return FamilyVersion.from_json(data)
