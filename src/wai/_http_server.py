"""The uvicorn server the HTTP commands run (``wai serve``, ``wai demo --serve``, ``wai
callbacks serve``), and the socket it serves on.

Imported only by those optional modules: uvicorn comes with the ``http`` extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Iterator

import uvicorn

__all__ = ["SignalServer", "listening_socket"]


class SignalServer(uvicorn.Server):
    """uvicorn's server, stopping on SIGTERM/SIGINT without re-raising the signal afterwards.

    uvicorn's own handlers raise the captured signal again once the server has
    stopped, which would kill the process before the client's pool is closed.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._stop, sig)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread, or not supported here
        try:
            yield
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    def _stop(self, sig: signal.Signals) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: stop waiting for open requests
        self.should_exit = True


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port`` (port 0: a free one), for uvicorn to serve.

    Listening first lets a command refuse an address in use (``OSError``) before it
    starts anything, and announce the port it really got; connections that arrive
    before uvicorn accepts them wait in the backlog.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen()
    except BaseException:
        sock.close()
        raise
    return sock
