"""What fevex-sqlite answers for its own URLs on the ``fevex`` command line: ``fevex db
status|upgrade``, and the check that a command about to open a store names a file that
exists (unless ``--create``).

Nothing beyond the standard library and fevex is imported until a command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fevex.plugins import CommandRegistry

__all__ = ["add_store_commands"]

_CREATE_HINT = "check the path, or pass --create to create it"


def add_store_commands(cli: CommandRegistry) -> None:
    from fevex_sqlite.location import SCHEMES

    cli.add_store_commands(SCHEMES, status=_status, upgrade=_upgrade, check=_check)


def _check(url: str, create: bool) -> None:
    """Refuse a store URL naming a file that does not exist, unless ``create``: a misspelt
    ``--store`` would otherwise become a new, empty store that holds no run."""
    from fevex_sqlite.location import parse_location

    location = parse_location(url)
    if not (create or location.create) and not location.path.exists():
        from fevex_sqlite.errors import store_not_found

        raise store_not_found(location.path, hint=_CREATE_HINT)


def _status(url: str) -> int:
    from fevex_sqlite.errors import store_not_found
    from fevex_sqlite.location import parse_location
    from fevex_sqlite.schema import LATEST_VERSION, schema_version

    path = parse_location(url).path
    if not path.exists():
        raise store_not_found(path, hint="check the path; fevex db upgrade --create makes it")
    version = schema_version(path)
    state = "up to date" if version == LATEST_VERSION else "needs: fevex db upgrade"
    if version > LATEST_VERSION:
        state = "newer than this fevex-sqlite"
    print(f"{path}: schema version {version}, this code needs {LATEST_VERSION} ({state}).")
    return 0 if version == LATEST_VERSION else 1


def _upgrade(url: str, create: bool) -> int:
    from fevex_sqlite.errors import store_not_found
    from fevex_sqlite.location import DEFAULT_BUSY_TIMEOUT, parse_location
    from fevex_sqlite.schema import upgrade_database

    location = parse_location(url)
    if not (create or location.create) and not location.path.exists():
        raise store_not_found(location.path, hint=_CREATE_HINT)
    busy_timeout = location.busy_timeout
    done = upgrade_database(
        location.path,
        busy_timeout=DEFAULT_BUSY_TIMEOUT if busy_timeout is None else busy_timeout,
    )
    if done.previous_version == 0:
        print(f"Created {location.path} at schema version {done.version}.")
    elif done.applied:
        applied = ", ".join(str(version) for version in done.applied)
        print(
            f"Upgraded {location.path} from schema version {done.previous_version} to "
            f"{done.version} (applied {applied})."
        )
    else:
        print(f"{location.path} is up to date (schema version {done.version}).")
    return 0
