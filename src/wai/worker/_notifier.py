"""One LISTEN connection whose notifications wake the queue producers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql

__all__ = ["Notifier"]

logger = logging.getLogger("wai.worker")


class Notifier:
    """Listens on the schema's channel and calls ``on_queue(queue)`` per notification.

    NOTIFY is only a wakeup: after a reconnect every queue is woken, since
    notifications sent while disconnected are lost.
    """

    def __init__(
        self,
        url: str,
        channel: str,
        on_queue: Callable[[str], None],
        on_reconnect: Callable[[], None],
    ) -> None:
        self._url = url
        self._channel = channel
        self._on_queue = on_queue
        self._on_reconnect = on_reconnect
        self.connected = asyncio.Event()

    async def run_forever(self) -> None:
        """Listen until cancelled, reconnecting with backoff."""
        delay = 0.1
        first = True
        while True:
            conn: AsyncConnection[Any] | None = None
            try:
                conn = await AsyncConnection.connect(self._url, autocommit=True)
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                self.connected.set()
                if not first:
                    self._on_reconnect()
                first = False
                delay = 0.1
                async for note in conn.notifies():
                    self._on_queue(note.payload)
            except psycopg.Error as exc:
                logger.warning("wai: LISTEN connection lost (%s); polling until it is back", exc)
            finally:
                self.connected.clear()
                if conn is not None:
                    await conn.close()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
