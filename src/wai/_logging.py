"""wai's logging: how the library emits a record, and how the command line sets logging up.

The library only logs (loggers under ``wai.``), through :func:`emit`, which no broken
handler or filter can make raise; it never configures logging: an application that
runs ``client.run()`` configures it as it likes. A record about one job carries
:func:`job_extra` (``job_id``, ``kind``, ``queue``, ``attempt``...), one about several
:func:`jobs_extra` (``job_ids``, ``count``). The long-running commands (``wai
worker``, ``wai maintenance``, ``wai serve``, ``wai callbacks serve``) own their
process, so :func:`configure` sets up the root logger: the app's own loggers come out
through the same handler, in the same format (text, or one JSON object per line with
:class:`JsonFormatter`), and so do the command's own lines (:func:`say`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from wai._job import JobRow

__all__ = [
    "FORMATS",
    "LEVELS",
    "JsonFormatter",
    "configure",
    "emit",
    "job_extra",
    "jobs_extra",
    "json_lines",
    "say",
]

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")

#: The attributes every LogRecord has: any other one came from ``extra=``.
_STANDARD = frozenset(
    (*vars(logging.LogRecord("", 0, "", 0, "", None, None)), "message", "asctime", "taskName")
)


def emit(
    target: logging.Logger,
    level: int,
    message: str,
    *args: object,
    extra: Mapping[str, object] | None = None,
    exc_info: BaseException | bool | None = None,
) -> None:
    """``target.log(...)``, except that nothing a handler or filter raises gets out."""
    try:
        # stacklevel: the record names the caller of emit (its module, function, line).
        target.log(level, message, *args, extra=extra, exc_info=exc_info, stacklevel=2)
    except Exception as exc:  # a user's handler or filter is broken
        with contextlib.suppress(Exception):  # even stderr failed: nothing is left to tell
            lost = type(exc).__name__
            sys.stderr.write(f"wai: a log record of {target.name} was lost ({lost})\n")


def job_extra(row: JobRow, **more: object) -> dict[str, object]:
    """The ``extra`` fields of a record about the job of ``row``, as the row says."""
    return {
        "job_id": row.id,
        "kind": row.kind,
        "queue": row.queue,
        "attempt": row.attempt,
        "max_attempts": row.max_attempts,
        **more,
    }


def jobs_extra(rows: Sequence[JobRow], **more: object) -> dict[str, object]:
    """The ``extra`` fields of a record about ``rows``: ``job_ids`` and ``count``.

    A record about a single job carries that job's :func:`job_extra` too, so that a
    filter on ``job_id`` finds it.
    """
    fields: dict[str, object] = {"job_ids": [row.id for row in rows], "count": len(rows)}
    if len(rows) == 1:
        fields.update(job_extra(rows[0]))
    return {**fields, **more}


def _text_of(value: object) -> str:
    """``str(value)``, else its ``repr``, else its type name: a JSON line never fails."""
    for convert in (str, repr):
        try:
            return convert(value)
        except Exception:  # noqa: S112 - a value whose __str__ raises is still logged
            continue
    return f"<{type(value).__name__}>"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``.

    Every attribute given with ``extra=`` (wai's ``job_id``, ``kind``, ``queue``,
    ``attempt``... and an app's own) follows as a key of its own; a value JSON
    cannot hold is written as its text. A traceback is in ``exc_info``.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in line and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=_text_of, ensure_ascii=False)


_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Lines:
    """Whether :func:`configure` chose JSON: the command's own lines are records then."""

    json = False


#: The logger of the command line's own lines in JSON mode (:func:`say`).
_cli_logger = logging.getLogger("wai.cli")


def json_lines() -> bool:
    """Whether :func:`configure` chose JSON (the command's own lines are records then)."""
    return _Lines.json


def say(message: str, level: int = logging.INFO) -> None:
    """A line for the operator: ``wai: <message>`` on stderr, never raising.

    Once :func:`configure` chose ``json`` it is a record of ``wai.cli`` at ``level``
    instead, so that every line the process writes is one JSON object.
    """
    if _Lines.json:
        emit(_cli_logger, level, "%s", message)
        return
    with contextlib.suppress(Exception):  # a closed stderr must not stop the caller
        print(f"wai: {message}", file=sys.stderr, flush=True)


def configure(level: str = "info", fmt: str = "text", *, stream: TextIO | None = None) -> None:
    """Log to ``stream`` (stderr) in ``fmt`` ("text" or "json"), replacing root's handlers.

    The ``wai`` loggers log at ``level``; every other logger (the app's, the
    libraries') at ``level`` or ``info``, whichever is higher, so that
    ``debug`` shows wai's detail without every library's. With ``json``, the
    command's own lines (:func:`say`) are records too.
    """
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(_TEXT))
    number = logging.getLevelNamesMapping()[level.upper()]
    logging.basicConfig(handlers=[handler], level=max(number, logging.INFO), force=True)
    logging.getLogger("wai").setLevel(number)
    _Lines.json = fmt == "json"
