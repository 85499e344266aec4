"""One LISTEN connection: queue wakeups for the producers, cancel requests for attempts."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import psycopg
from psycopg import AsyncConnection, sql

from wai._connect import keepalives
from wai._logging import emit
from wai._supervise import supervise

__all__ = ["Notifier", "parse_cancel"]

logger = logging.getLogger("wai.worker")


def parse_cancel(payload: str) -> tuple[int, int] | None:
    """``(job_id, run_lease)`` of a ``<schema>.cancel`` payload; None if it is malformed."""
    try:
        data: Any = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    fields = cast(dict[str, Any], data)
    job_id, lease = fields.get("job_id"), fields.get("run_lease")
    if type(job_id) is not int or type(lease) is not int:
        return None
    return job_id, lease


class Notifier:
    """Listens on the schema's channel and calls ``on_queue(queue)`` per notification.

    *subscriptions* maps further channels to the callback that receives their
    payloads (the runtime's ``<schema>.cancel`` handler). NOTIFY is only a wakeup:
    after a reconnect every queue is woken, since notifications sent while
    disconnected are lost (a missed cancel is caught by the next heartbeat).
    ``on_lost`` runs when an established connection is lost.

    With a *probe* (a coroutine that sends a note on the given channel with the given
    payload over another connection) the notifier proves, after each connect, that
    notifications reach it: :attr:`delivering` turns true only once its own probe
    came back. A LISTEN through a transaction-mode pooler connects but receives
    nothing; loops that back off while idle rely on :attr:`delivering`, never on
    :attr:`connected` alone. The connection sets TCP keepalives (unless its URL sets
    its own), so a peer that vanished without closing it is noticed in about 30 s.
    """

    def __init__(
        self,
        url: str,
        channel: str,
        on_queue: Callable[[str], None],
        on_reconnect: Callable[[], None],
        *,
        subscriptions: Mapping[str, Callable[[str], None]] | None = None,
        on_lost: Callable[[], None] | None = None,
        probe: Callable[[str, str], Awaitable[None]] | None = None,
        probe_channel: str | None = None,
    ) -> None:
        self._url = url
        self._on_reconnect = on_reconnect
        self._on_lost = on_lost
        self._routes: dict[str, Callable[[str], None]] = {channel: on_queue}
        self._routes.update(subscriptions or {})
        self._probe = probe
        self._probe_channel = probe_channel if probe is not None else None
        self._token = ""
        self._probed = asyncio.Event()
        self._warned = False
        self.connected = asyncio.Event()
        #: Whether a note sent now would reach this process: its probe came back on the
        #: current connection (always False without a probe).
        self.delivering = False
        self._listened = False  # once listening, a new connection may have missed notes

    def _dispatch(self, channel: str, payload: str) -> None:
        route = self._routes.get(channel)
        if route is None:
            return
        try:
            route(payload)
        except Exception:  # a bad payload must not drop the LISTEN connection
            emit(
                logger,
                logging.ERROR,
                "wai: handling a notification on %r failed",
                channel,
                exc_info=True,
            )

    async def run_forever(self) -> None:
        """Listen until cancelled, reconnecting with backoff; restarted after an
        unexpected error (:func:`wai._supervise.supervise`)."""
        await supervise("LISTEN loop", self._listen)

    async def _listen(self) -> None:
        delay = 0.1
        while True:
            conn: AsyncConnection[Any] | None = None
            probing: asyncio.Task[None] | None = None
            try:
                # Autocommit: LISTEN takes effect at commit; notes arrive between transactions.
                conn = await AsyncConnection.connect(
                    self._url, autocommit=True, client_encoding="UTF8", **keepalives(self._url)
                )
                channels = [*self._routes, *([self._probe_channel] if self._probe_channel else [])]
                for name in channels:
                    # Quoted: a channel name holds a dot ("<schema>.jobs").
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
                self.connected.set()
                if self._listened:
                    self._on_reconnect()
                self._listened = True
                delay = 0.1
                if self._probe is not None:
                    probing = asyncio.create_task(self._prove(), name="wai-listen-probe")
                async for note in conn.notifies():
                    if note.channel == self._probe_channel:
                        if note.payload == self._token:
                            self.delivering = True
                            self._probed.set()
                        continue
                    self._dispatch(note.channel, note.payload)
            except psycopg.Error as exc:
                logger.warning("wai: LISTEN connection lost (%s); polling until it is back", exc)
                lost = self.connected.is_set()
                self._closed()
                if lost and self._on_lost is not None:
                    # Not when cancelled: waking loops that are being cancelled too could
                    # make one swallow its cancellation (asyncio.wait_for on Python 3.11).
                    self._on_lost()
            finally:
                if probing is not None:
                    probing.cancel()
                self._closed()
                if conn is not None:
                    await conn.close()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _closed(self) -> None:
        self.connected.clear()
        self.delivering = False

    async def _prove(self) -> None:
        """Send the probe until it comes back on this connection: every 5 s while the
        sending fails, every 60 s while notes are sent but none arrives (a pooler)."""
        assert self._probe is not None
        assert self._probe_channel is not None
        while True:
            self._token = secrets.token_hex(8)
            self._probed.clear()
            try:
                await self._probe(self._probe_channel, self._token)
            except Exception as exc:  # the pool is down: retry; polling goes on meanwhile
                logger.debug("wai: sending the LISTEN probe failed: %s", exc)
                await asyncio.sleep(5.0)
                continue
            try:
                await asyncio.wait_for(self._probed.wait(), 5.0)
            except TimeoutError:
                if not self._warned:
                    self._warned = True
                    emit(
                        logger,
                        logging.WARNING,
                        "wai: the LISTEN connection receives no notification (is it "
                        "through a transaction-mode pooler? give listen_url a direct "
                        "connection); idle queues keep polling every poll_interval",
                    )
                await asyncio.sleep(60.0)
                continue
            return
