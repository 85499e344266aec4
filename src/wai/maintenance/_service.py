"""The shape of every maintenance service: ``run_once`` plus a loop around it."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod

__all__ = ["PeriodicService"]

logger = logging.getLogger("wai.maintenance")


class PeriodicService(ABC):
    """Runs ``run_once`` every ``interval`` seconds until cancelled.

    Tests call ``run_once`` directly and never wait on the loop.
    """

    interval: float

    @abstractmethod
    async def run_once(self) -> object:
        """One pass; returns a small result for logs and tests."""

    async def run_forever(self) -> None:
        """Loop until cancelled; a failed pass is logged and retried next interval."""
        while True:
            try:
                result = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("wai: %s pass failed", type(self).__name__)
            else:
                logger.debug("wai: %s pass: %s", type(self).__name__, result)
            await asyncio.sleep(self.interval)
