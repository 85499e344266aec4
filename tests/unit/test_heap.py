"""The startup heap's freeze: garbage collected first, the rest out of full passes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# In a child process: freezing is for good, and the test runner's heap is not a worker's.
CHILD = textwrap.dedent(
    """
    import gc
    import weakref

    from wai.worker._heap import freeze_startup_heap

    class Node:
        pass

    garbage = Node()
    garbage.self = garbage  # a cycle only the collector frees
    gone = weakref.ref(garbage)
    del garbage
    kept = Node()
    gc.disable()  # no pass of its own may free the cycle first

    frozen = freeze_startup_heap()

    assert gone() is None, "the cycle was frozen instead of collected"
    assert frozen == gc.get_freeze_count() > 0
    assert not any(o is kept for o in gc.get_objects()), "a frozen object is still tracked"
    print(frozen)
    """
)


def test_freeze_collects_garbage_first_and_leaves_the_rest_out_of_the_collector() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 1000
