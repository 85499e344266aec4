"""The line protocol between ``run.py`` and its children (standard library only).

Producer (``producer.py --adapter NAME --url URL``)::

    child  -> {"ready": true, "version": "...", "pid": N}     after setup (schema installed)
    parent -> {"cmd": "insert_single", "start": 0, "count": 20000}
    parent -> {"cmd": "insert_batch", "start": 0, "count": 20000, "chunk": 1000}
    parent -> {"cmd": "latency", "count": 200, "interval": 0.02}
    parent -> {"cmd": "ping"}                                  flush its backends' statistics
    parent -> {"cmd": "soak", "start": 0, "seconds": 600, "rate": 500, "batch": 50}
    parent -> {"cmd": "sustained", "start": 0, "seconds": 600, "rate": 800, "epoch": T,
               "window": 10, "chain_every": 5}       single timed inserts on a fixed schedule
    child  -> {"window": k, "counts": {...}, ...}              (sustained) one line per window
    child  -> {"ok": true, "elapsed": seconds, ...}            after each command (soak adds
                                                               inserted, batches, late_batches,
                                                               max_lag_s, next_seq)
    parent closes stdin                                        child closes and exits

Worker (``worker_NAME.py --url URL --concurrency C``; wai's also takes ``--followups``,
``--cpu-ms X``, ``--sync-handler``, ``--completed-retention S`` and ``--cleanup-interval S``;
with ``--window-epoch T --window-seconds S`` a worker also writes one
``{"window": k, ...}`` line per window, see ``windows.py``)::

    child  -> READY            imported, connected, handler registered; nothing started
    parent -> GO               child starts its workers (start-up is inside the clock)
    parent -> STOP             child shuts its workers down
    child  -> {"handled": n, "latencies": [s, ...], "start_seconds": s, ...}

Every other output of a child goes to its stderr.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

__all__ = ["emit", "read_line"]


def emit(obj: dict[str, Any] | str) -> None:
    """Write one protocol line to stdout."""
    line = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def read_line() -> str:
    """Read one line of stdin without blocking the event loop ("" at end of input)."""
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return line.strip()
