"""A throwaway PgBouncer in transaction pooling mode in front of a PostgreSQL server, for
the tests (tests/integration/test_pgbouncer.py) and bench/pgbouncer.py."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["binary", "running"]


def binary() -> str | None:
    """The ``pgbouncer`` program (Debian installs it in /usr/sbin), or None."""
    found = shutil.which("pgbouncer")
    if found is None and Path("/usr/sbin/pgbouncer").exists():
        found = "/usr/sbin/pgbouncer"
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running(host: str, port: int | str, user: str, *, pool_size: int = 2) -> Iterator[int]:
    """PgBouncer forwarding every database to ``host:port`` as ``user`` (trust auth),
    ``pool_size`` server connections per database; yields the port it listens on."""
    program = binary()
    if program is None:
        raise FileNotFoundError("pgbouncer is not installed (apt-get install pgbouncer)")
    # Not under pytest's tmp_path: run as another user (below), PgBouncer must reach it.
    home = Path(tempfile.mkdtemp(prefix="wai-pgbouncer-"))
    home.chmod(0o755)
    listen = _free_port()
    config = home / "pgbouncer.ini"
    log = home / "pgbouncer.log"
    config.write_text(
        f"[databases]\n* = host={host} port={port} user={user}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n"
        "auth_type = any\npool_mode = transaction\n"
        f"max_client_conn = 400\ndefault_pool_size = {pool_size}\n"
        "ignore_startup_parameters = extra_float_digits,options\n"
        f"logfile = {log}\n"
    )
    command = [program]
    if os.geteuid() == 0:  # PgBouncer refuses to run as root
        shutil.chown(home, "postgres")
        shutil.chown(config, "postgres")
        command += ["-u", "postgres"]
    proc = subprocess.Popen(
        [*command, str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", listen), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    text = log.read_text() if log.exists() else ""
                    raise RuntimeError(f"pgbouncer did not start: {text}") from None
                time.sleep(0.05)
        yield listen
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(home, ignore_errors=True)
