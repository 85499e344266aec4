"""wai._logging: the safe emit, the JSON lines, the command line's configuration."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from tests.unit.test_demo import row
from wai import _logging
from wai._logging import JsonFormatter, configure, emit, job_extra, jobs_extra, say
from wai._outcomes import describe_exception
from wai.cli._common import err


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no")

    def __repr__(self) -> str:
        raise RuntimeError("no either")


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    log = logging.getLogger("wai.test_logging")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    try:
        yield log
    finally:
        log.handlers.clear()
        log.filters.clear()
        log.propagate = True
        log.setLevel(logging.NOTSET)


def test_emit_survives_a_raising_filter_and_handler(
    logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(record: logging.LogRecord) -> bool:
        raise ValueError("broken filter")

    logger.addFilter(broken)
    emit(logger, logging.WARNING, "job %s failed", 1, extra={"job_id": 1})
    assert "a log record of wai.test_logging was lost (ValueError)" in capsys.readouterr().err

    logger.removeFilter(broken)

    class Raising(logging.Handler):
        def handle(self, record: logging.LogRecord) -> bool:
            raise RuntimeError("broken handler")

    logger.addHandler(Raising())
    emit(logger, logging.ERROR, "boom", exc_info=True)  # nothing escapes
    emit(logger, logging.INFO, "clashing extra", extra={"message": "x"})  # a KeyError inside


def test_json_lines_carry_the_extra_fields(logger: logging.Logger) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)

    logger.info(
        "job %s failed",
        7,
        extra={"job_id": 7, "kind": "email", "queue": "q", "attempt": 2, "odd": Unprintable()},
    )
    try:
        raise ValueError("inner")
    except ValueError:
        logger.exception("with a traceback")

    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["message"] == "job 7 failed"
    assert first["level"] == "INFO"
    assert first["logger"] == "wai.test_logging"
    assert first["time"].endswith("+00:00")
    assert (first["job_id"], first["kind"], first["queue"], first["attempt"]) == (
        7,
        "email",
        "q",
        2,
    )
    assert first["odd"] == "<Unprintable>"
    assert "args" not in first  # the record's own attributes are not extras
    assert "msg" not in first
    assert "ValueError: inner" in second["exc_info"]


def test_configure_sets_the_root_handler_and_levels() -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("wai").level)
    out = io.StringIO()
    try:
        configure("debug", "json", stream=out)
        assert logging.getLogger("wai").level == logging.DEBUG
        assert root.level == logging.INFO  # other loggers: not below info
        logging.getLogger("wai.jobs").debug("shown")
        logging.getLogger("elsewhere").debug("hidden")
        logging.getLogger("elsewhere").info("also shown")
        messages = [json.loads(line)["message"] for line in out.getvalue().splitlines()]
        assert messages == ["shown", "also shown"]

        configure("error", "text", stream=out)
        assert root.level == logging.ERROR
        with pytest.raises(ValueError, match="log level"):
            configure("loud", "text")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logging.getLogger("wai").setLevel(saved[2])


def test_an_exception_whose_str_raises_is_described_by_its_type() -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    try:
        raise Broken
    except Broken as exc:
        text = describe_exception(exc)
    assert text.startswith("Broken: <str() of the exception raised>")


def test_emit_names_its_caller(logger: logging.Logger) -> None:
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger.addHandler(Keep())
    emit(logger, logging.INFO, "hello")
    (record,) = seen
    assert record.funcName == "test_emit_names_its_caller"  # not emit, in _logging.py
    assert record.pathname == __file__


def test_job_fields_of_one_job_and_of_several() -> None:
    first, second = row(7, "email", attempt=2), row(8, "email", queue="other")
    assert job_extra(first, outcome="retried") == {
        "job_id": 7,
        "kind": "email",
        "queue": "q",
        "attempt": 2,
        "max_attempts": 3,
        "outcome": "retried",
    }
    # one job: its own fields too, so that a filter on job_id finds the record
    assert jobs_extra([first], reason="stale_heartbeat") == {
        "job_ids": [7],
        "count": 1,
        **job_extra(first),
        "reason": "stale_heartbeat",
    }
    assert jobs_extra([first, second]) == {"job_ids": [7, 8], "count": 2}


@pytest.fixture
def root_restored() -> Iterator[None]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("wai").level)
    try:
        yield
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logging.getLogger("wai").setLevel(saved[2])
        _logging._Lines.json = False  # pyright: ignore[reportPrivateUsage]


@pytest.mark.usefixtures("root_restored")
def test_the_commands_own_lines_are_json_records_once_json_is_chosen(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    configure("info", "text", stream=out)
    say("worker for app:client")
    err("no database", "")
    assert capsys.readouterr().err == "wai: worker for app:client\nwai: no database\n"
    assert out.getvalue() == ""

    configure("info", "json", stream=out)
    say("shutting down")
    err("schema not migrated")  # an error
    err("warning: the schema is behind; /readyz answers 503 until then", "")
    err("serving read-only", "")
    assert capsys.readouterr().err == ""
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(x["logger"], x["level"], x["message"]) for x in lines] == [
        ("wai.cli", "INFO", "shutting down"),
        ("wai.cli", "ERROR", "schema not migrated"),
        ("wai.cli", "WARNING", "the schema is behind; /readyz answers 503 until then"),
        ("wai.cli", "INFO", "serving read-only"),
    ]
