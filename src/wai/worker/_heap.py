"""A worker process's startup heap, kept out of the garbage collector's full passes."""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap"]


def freeze_startup_heap() -> int:
    """Collect garbage, then move every object the process holds to the collector's
    permanent generation (:func:`gc.freeze`); returns how many objects that froze.

    A busy worker allocates fast, so the collector's full passes come every few seconds,
    and each walks the whole heap: the application, its libraries and wai, objects that
    live as long as the process. Such a pass stops the event loop, and every job waiting
    for its turn waits on it too (20-58 ms a pass on a 2-core machine, ``bench/RESULTS.md``).
    Frozen, those objects are skipped and a pass walks only what was allocated since.

    Frozen objects are never collected as cyclic garbage (reference counting still frees
    them), so this is for a process that runs a worker, once its imports and setup are
    done: ``wai worker`` calls it after connecting, before it starts claiming.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
