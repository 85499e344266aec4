"""A throwaway PostgreSQL cluster: ``initdb`` into a temporary directory, started on a free port.

Used by ``profile.py`` (with ``pg_stat_statements`` preloaded) and ``sustained.py`` (with
the server's defaults: autovacuum on, fsync and synchronous_commit on). As root, ``initdb``
and ``postgres`` run as the ``postgres`` OS user (they refuse to run as root). The cluster
is stopped and its directory removed when the context ends, also on an error or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["bindir", "cluster", "free_port"]


def bindir() -> Path:
    """The directory of the newest installed ``initdb`` (Debian's layout first, then PATH)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise SystemExit(
            "a throwaway cluster needs PostgreSQL's initdb (/usr/lib/postgresql/*/bin)"
        )
    return Path(initdb).parent


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def cluster(settings: str = "", *, prefix: str = "wai-cluster-") -> Iterator[str]:
    """Start a private cluster; yield its server URL (``postgresql://postgres@127.0.0.1:PORT``).

    ``settings``: lines appended to ``postgresql.conf``; everything else is ``initdb``'s
    default, apart from the port, ``listen_addresses`` and the socket directory.
    """
    pg = bindir()
    root = Path(tempfile.mkdtemp(prefix=prefix))
    as_postgres = os.geteuid() == 0
    run_as = ["runuser", "-u", "postgres", "--"] if as_postgres else []
    if as_postgres:
        shutil.chown(root, "postgres", "postgres")
    data, log, port = root / "data", root / "server.log", free_port()

    def run(*cmd: str) -> None:
        # quiet on success (stdout is the callers' report); everything on failure
        done = subprocess.run(
            [*run_as, str(pg / cmd[0]), *cmd[1:]], cwd=root, capture_output=True, text=True
        )
        if done.returncode != 0:
            print(done.stdout, done.stderr, sep="\n", file=sys.stderr)
            done.check_returncode()

    started = False
    try:
        run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(
                settings + f"port = {port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{root}'\n"
            )
        started = True
        run("pg_ctl", "start", "-w", "-t", "60", "-D", str(data), "-l", str(log))
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        if started:
            with contextlib.suppress(subprocess.CalledProcessError):
                run("pg_ctl", "stop", "-w", "-t", "30", "-m", "fast", "-D", str(data))
        shutil.rmtree(root, ignore_errors=True)
