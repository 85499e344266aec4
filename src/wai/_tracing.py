"""Whether wai traces: the optional OpenTelemetry modules, looked for once, at import.

``otel`` is :mod:`wai._otel` when ``opentelemetry-api`` is installed (``pip install
'wai[otel]'``), else None. Every call site tests ``otel is not None and otel.active()``
before any tracing work, so a process without the package does none at all, and one
with the package but no tracer provider (no SDK configured) pays that one test per
insert, attempt, callback resolution or rescue. ``otel_metrics`` (:mod:`wai._otel_metrics`)
is there under the same condition: wai's metrics go to a meter provider once one is set.
See docs/observability.md.
"""

from __future__ import annotations

__all__ = ["otel", "otel_metrics"]

try:
    from wai import _otel as otel
    from wai import _otel_metrics as otel_metrics
except ModuleNotFoundError as exc:  # only the package's absence turns tracing off
    if not (exc.name or "").startswith("opentelemetry"):
        raise
    otel = None
    otel_metrics = None
