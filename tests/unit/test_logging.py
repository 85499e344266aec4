"""wai._logging: the safe emit, the JSON lines, the command line's configuration."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from wai._logging import JsonFormatter, configure, emit
from wai._outcomes import describe_exception


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
