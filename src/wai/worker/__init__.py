"""The worker runtime: claims, runs and finalizes jobs (async only)."""

from __future__ import annotations

from wai.worker._runtime import Runtime
from wai.worker._settings import RuntimeSettings

__all__ = ["Runtime", "RuntimeSettings"]
