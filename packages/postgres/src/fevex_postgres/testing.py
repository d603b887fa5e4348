"""A throwaway PostgreSQL server for tests.

``postgres_server()`` creates a cluster in a temporary folder, starts it on a free loopback
port with its socket in that folder and trust authentication, creates a database and
yields its ``postgresql+psycopg://`` URL; on exit it stops the server and deletes the
folder. It needs the PostgreSQL server programs (``initdb``, ``pg_ctl``, ``postgres``,
``createdb``): it looks in ``$FEVEX_POSTGRES_BIN``, on ``PATH``, then in Debian's
``/usr/lib/postgresql/<version>/bin``, and raises :class:`PostgresNotAvailable` naming what
it could not find. PostgreSQL refuses to run as root, so as root the server runs as the
``postgres`` user (through ``runuser``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import make_url

__all__ = ["PostgresNotAvailable", "find_postgres_bin", "libpq_url", "postgres_server"]

_PROGRAMS = ("initdb", "pg_ctl", "postgres", "createdb")
_SERVER_USER = "postgres"
# Durability is worth nothing in a server that is deleted after the tests.
_FAST_SETTINGS = (
    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
)


class PostgresNotAvailable(RuntimeError):
    """The PostgreSQL server programs, or the user to run them as, are missing."""


def find_postgres_bin() -> Path:
    """The folder holding ``initdb``, ``pg_ctl``, ``postgres`` and ``createdb``."""
    candidates: list[Path] = []
    configured = os.environ.get("FEVEX_POSTGRES_BIN")
    if configured:
        candidates.append(Path(configured))
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        versions = [path for path in debian.iterdir() if path.name.isdigit()]
        for version in sorted(versions, key=lambda path: int(path.name), reverse=True):
            candidates.append(version / "bin")
    for folder in candidates:
        if not _missing_programs(folder):
            return folder
    raise PostgresNotAvailable(
        f"PostgreSQL server programs ({', '.join(_PROGRAMS)}) not found in $FEVEX_POSTGRES_BIN, "
        "on PATH or in /usr/lib/postgresql/*/bin; install them (for example "
        "`apt-get install postgresql-15`) or set FEVEX_TEST_POSTGRES_URL to a server to use."
    )


@contextmanager
def postgres_server(
    *, database: str = "fevex", bin_dir: str | os.PathLike[str] | None = None
) -> Iterator[str]:
    """Run a fresh PostgreSQL server for the ``with`` block; yields the URL of ``database``
    on it (user ``postgres``, no password)."""
    if bin_dir is None:
        programs = find_postgres_bin()
    else:
        programs = Path(bin_dir)
        missing = _missing_programs(programs)
        if missing:
            raise PostgresNotAvailable(
                f"PostgreSQL server programs {', '.join(missing)} not found in {programs}."
            )
    as_server_user = _server_user_prefix()
    root = Path(tempfile.mkdtemp(prefix="fevex-pg-"))
    data = root / "data"
    log = root / "server.log"
    started = False
    try:
        if as_server_user:
            shutil.chown(root, user=_SERVER_USER, group=None)
        _run(
            [
                *as_server_user,
                str(programs / "initdb"),
                "--pgdata",
                str(data),
                "--username",
                "postgres",
                "--auth",
                "trust",
                "--encoding",
                "UTF8",
                "--locale",
                "C",
                "--no-sync",
            ],
            "initdb",
        )
        port = _start(programs, as_server_user, data, root, log)
        started = True
        _run(
            [
                str(programs / "createdb"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--username",
                "postgres",
                database,
            ],
            "createdb",
        )
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}"
    finally:
        if started:
            subprocess.run(
                [*as_server_user, str(programs / "pg_ctl"), "stop", "-D", str(data), "-m", "fast"],
                capture_output=True,
                check=False,
                timeout=60,
            )
        shutil.rmtree(root, ignore_errors=True)


def libpq_url(url: str) -> str:
    """A store URL (``postgresql+psycopg://...``, as :func:`postgres_server` yields) as
    psycopg, libpq and the PostgreSQL programs read it, password included."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _missing_programs(folder: Path) -> list[str]:
    return [program for program in _PROGRAMS if not (folder / program).is_file()]


def _server_user_prefix() -> list[str]:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if runuser is None:
        raise PostgresNotAvailable(
            "Running as root, the PostgreSQL server must run as another user, and `runuser` "
            "was not found."
        )
    try:
        import pwd

        pwd.getpwnam(_SERVER_USER)
    except KeyError:
        raise PostgresNotAvailable(
            f"Running as root, the PostgreSQL server must run as the user {_SERVER_USER!r}, "
            "which does not exist (installing the postgresql package creates it)."
        ) from None
    return [runuser, "-u", _SERVER_USER, "--"]


def _start(programs: Path, as_server_user: list[str], data: Path, root: Path, log: Path) -> int:
    # A port found free can be taken before the server binds it; try a few.
    for _attempt in range(5):
        port = _free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} "
            f"-c unix_socket_directories={shlex.quote(str(root))} {_FAST_SETTINGS}"
        )
        started = subprocess.run(
            [
                *as_server_user,
                str(programs / "pg_ctl"),
                "start",
                "-D",
                str(data),
                "-l",
                str(log),
                "-w",
                "-t",
                "60",
                "-o",
                options,
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=90,
        )
        if started.returncode == 0:
            return port
        server_log = log.read_text(errors="replace") if log.exists() else ""
        if "already in use" not in server_log and "could not bind" not in server_log:
            raise RuntimeError(
                f"pg_ctl start failed:\n{started.stdout}{started.stderr}\n{server_log[-2000:]}"
            )
    raise RuntimeError("pg_ctl start found no free port on 127.0.0.1 after 5 attempts.")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _run(command: Sequence[str], what: str) -> None:
    completed = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    if completed.returncode != 0:
        raise RuntimeError(f"{what} failed ({completed.returncode}):\n{completed.stderr}")
