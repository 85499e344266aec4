"""Whether wai traces: the optional OpenTelemetry module, looked for once, at import.

``otel`` is :mod:`wai._otel` when ``opentelemetry-api`` is installed (``pip install
'wai[otel]'``), else None. Every call site tests ``otel is not None and otel.active()``
before any tracing work, so a process without the package does none at all, and one
with the package but no tracer provider (no SDK configured) pays that one test per
insert, attempt, callback resolution or rescue. See docs/observability.md.
"""

from __future__ import annotations

__all__ = ["otel"]

try:
    from wai import _otel as otel
except ModuleNotFoundError as exc:  # only the package's absence turns tracing off
    if not (exc.name or "").startswith("opentelemetry"):
        raise
    otel = None
