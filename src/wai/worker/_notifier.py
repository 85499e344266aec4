"""One LISTEN connection: queue wakeups for the producers, cancel requests for attempts."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

import psycopg
from psycopg import AsyncConnection, sql

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
    """

    def __init__(
        self,
        url: str,
        channel: str,
        on_queue: Callable[[str], None],
        on_reconnect: Callable[[], None],
        *,
        subscriptions: Mapping[str, Callable[[str], None]] | None = None,
    ) -> None:
        self._url = url
        self._on_reconnect = on_reconnect
        self._routes: dict[str, Callable[[str], None]] = {channel: on_queue}
        self._routes.update(subscriptions or {})
        self.connected = asyncio.Event()
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
            try:
                # Autocommit: LISTEN takes effect at commit; notes arrive between transactions.
                conn = await AsyncConnection.connect(self._url, autocommit=True)
                for name in self._routes:
                    # Quoted: a channel name holds a dot ("<schema>.jobs").
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
                self.connected.set()
                if self._listened:
                    self._on_reconnect()
                self._listened = True
                delay = 0.1
                async for note in conn.notifies():
                    self._dispatch(note.channel, note.payload)
            except psycopg.Error as exc:
                logger.warning("wai: LISTEN connection lost (%s); polling until it is back", exc)
            finally:
                self.connected.clear()
                if conn is not None:
                    await conn.close()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
