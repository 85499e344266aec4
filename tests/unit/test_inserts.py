from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tests.factories import HOSTILE, SendEmail
from wai._inserts import (
    MAX_TAGS,
    EnqueueRequest,
    NewJob,
    build_args_job,
    build_job,
    validate_queue,
)
from wai._job import JobState
from wai.errors import SerializationError, ValidationError


def no_default(_kind: str) -> str | None:
    return None


def build(args: Any = None, **options: Any) -> NewJob:
    default_queue: Callable[[str], str | None] = options.pop("default_queue", no_default)
    default_max: Callable[[str], int | None] = options.pop("default_max_attempts", lambda _k: None)
    return build_job(
        EnqueueRequest(SendEmail(to="a@b.c") if args is None else args, **options),
        default_queue=default_queue,
        default_max_attempts=default_max,
    )


def test_build_defaults() -> None:
    job = build()
    assert job.kind == "send_email"
    assert job.queue == "default"
    assert job.priority == 2
    assert job.max_attempts == 25
    assert job.state == JobState.AVAILABLE
    assert job.run_at is None
    assert job.tags == []
    assert job.metadata == "{}"
    assert job.args == '{"to":"a@b.c","subject":"hello"}'
    assert job.ordering_key is None
    assert job.trigger is None


@pytest.mark.parametrize(
    ("queue_of", "max_of", "trigger"),
    [
        (no_default, lambda _k: None, None),
        (lambda _k: "mail", lambda _k: 3, (7, 2, "completed", "spec")),
    ],
)
def test_build_args_job_is_build_job_with_every_option_at_its_default(
    queue_of: Callable[[str], str | None],
    max_of: Callable[[str], int | None],
    trigger: tuple[int, int, str, str] | None,
) -> None:
    for args in (SendEmail(to="a@b.c"), SendEmail(to=HOSTILE, subject="")):
        fast = build_args_job(
            args, default_queue=queue_of, default_max_attempts=max_of, trigger=trigger
        )
        full = build_job(
            EnqueueRequest(args),
            default_queue=queue_of,
            default_max_attempts=max_of,
            trigger=trigger,
        )
        assert fast == full


@pytest.mark.parametrize(
    ("args", "queue_of", "max_of"),
    [
        ({"to": "x"}, no_default, lambda _k: None),  # dict args need a kind
        (SendEmail(to="a"), lambda _k: "bad queue!", lambda _k: None),
        (SendEmail(to="a"), no_default, lambda _k: 0),  # not "or 25": 0 is falsy, 25 is used
        (SendEmail(to="a"), no_default, lambda _k: 1001),
    ],
)
def test_build_args_job_validates_like_build_job(
    args: Any, queue_of: Callable[[str], str | None], max_of: Callable[[str], int | None]
) -> None:
    def outcome(fn: Callable[[], NewJob]) -> str:
        try:
            return repr(fn())
        except ValidationError as exc:
            return f"ValidationError: {exc}"

    fast = outcome(
        lambda: build_args_job(args, default_queue=queue_of, default_max_attempts=max_of)
    )
    full = outcome(
        lambda: build_job(EnqueueRequest(args), default_queue=queue_of, default_max_attempts=max_of)
    )
    assert fast == full


def test_build_every_option() -> None:
    when = datetime.now(UTC) + timedelta(hours=1)
    job = build(
        {"x": 1},
        kind="custom",
        queue="emails",
        priority=4,
        max_attempts=3,
        run_at=when,
        tags=("a", "b"),
        metadata={"tenant": 7},
        ordering_key="user:7",
    )
    assert (job.kind, job.queue, job.priority, job.max_attempts) == ("custom", "emails", 4, 3)
    assert job.state == JobState.SCHEDULED
    assert job.run_at == when
    assert job.tags == ["a", "b"]
    assert job.metadata == '{"tenant":7}'
    assert job.ordering_key == "user:7"


# -- priority and max_attempts ---------------------------------------------------------


@pytest.mark.parametrize("priority", [1, 2, 3, 4])
def test_priority_in_range_is_accepted(priority: int) -> None:
    assert build(priority=priority).priority == priority


@pytest.mark.parametrize("priority", [0, 5, -1, True, False, 2.0, "2"])
def test_priority_out_of_range_or_not_int_is_rejected(priority: object) -> None:
    with pytest.raises(ValidationError, match="priority must be an integer from 1 to 4"):
        build(priority=priority)


def test_priority_none_takes_the_default() -> None:
    assert build(priority=None).priority == 2
    assert build().priority == 2


@pytest.mark.parametrize("max_attempts", [1, 25, 1000])
def test_max_attempts_in_range_is_accepted(max_attempts: int) -> None:
    assert build(max_attempts=max_attempts).max_attempts == max_attempts


@pytest.mark.parametrize("max_attempts", [0, -1, 1001, True, False, 2.5, "3"])
def test_max_attempts_out_of_range_is_rejected(max_attempts: object) -> None:
    with pytest.raises(ValidationError, match="max_attempts"):
        build(max_attempts=max_attempts)


def test_max_attempts_defaults_to_the_kinds_registered_value() -> None:
    assert build(default_max_attempts=lambda _k: 7).max_attempts == 7
    assert build(default_max_attempts=lambda _k: 7, max_attempts=2).max_attempts == 2


# -- queues --------------------------------------------------------------------------


@pytest.mark.parametrize("queue", ["default", "a", "Emails_2", "billing.eu:high-prio", "x" * 200])
def test_valid_queue_names(queue: str) -> None:
    assert validate_queue(queue) == queue
    assert build(queue=queue).queue == queue


@pytest.mark.parametrize(
    "queue", ["", "a b", "x" * 201, "x" * 300, HOSTILE, "tab\t", "new\nline", "é", "a/b", 5, b"q"]
)
def test_invalid_queue_names_are_rejected(queue: object) -> None:
    with pytest.raises(ValidationError, match="invalid queue name"):
        build(queue=queue)


def test_empty_queue_is_rejected_not_replaced_by_the_default() -> None:
    with pytest.raises(ValidationError, match="invalid queue name ''"):
        build(queue="", default_queue=lambda _k: "registered")


def test_queue_defaults_to_the_kinds_registered_queue() -> None:
    seen: list[str] = []

    def registered(kind: str) -> str | None:
        seen.append(kind)
        return "mail"

    assert build(default_queue=registered).queue == "mail"
    assert seen == ["send_email"]
    assert build(default_queue=registered, queue="other").queue == "other"


def test_registered_queue_is_validated_too() -> None:
    with pytest.raises(ValidationError, match="invalid queue name"):
        build(default_queue=lambda _k: "bad queue")


# -- tags ----------------------------------------------------------------------------


def test_tags_up_to_the_limit_are_accepted() -> None:
    tags = [f"t{i}" for i in range(MAX_TAGS)]
    assert build(tags=tags).tags == tags
    assert build(tags=iter(["a"])).tags == ["a"]
    assert build(tags=["x" * 255, HOSTILE]).tags == ["x" * 255, HOSTILE]


def test_too_many_tags_are_rejected() -> None:
    with pytest.raises(ValidationError, match=f"at most {MAX_TAGS} tags"):
        build(tags=[f"t{i}" for i in range(MAX_TAGS + 1)])


@pytest.mark.parametrize("tag", ["", "x" * 256, 1, None])
def test_invalid_tags_are_rejected(tag: object) -> None:
    with pytest.raises(ValidationError, match="invalid tag"):
        build(tags=["ok", tag])


@pytest.mark.parametrize(
    ("tag", "problem"), [("nul\x00", "NUL byte"), ("lone\ud800", "lone surrogate")]
)
def test_unstorable_tags_are_rejected_by_position(tag: str, problem: str) -> None:
    with pytest.raises(ValidationError, match=rf"^tags\[1\]: contains a {problem}"):
        build(tags=["ok", tag])


def test_a_single_string_is_not_a_tag_list() -> None:
    with pytest.raises(ValidationError, match="not one string"):
        build(tags="urgent")


# -- run_at --------------------------------------------------------------------------


def test_naive_run_at_is_rejected() -> None:
    with pytest.raises(ValidationError, match="timezone-aware"):
        build(run_at=datetime.now() + timedelta(hours=1))


@pytest.mark.parametrize("run_at", [1_700_000_000, "2030-01-01T00:00:00Z"])
def test_run_at_must_be_a_datetime(run_at: object) -> None:
    with pytest.raises(ValidationError, match="run_at must be a datetime"):
        build(run_at=run_at)


def test_aware_run_at_in_any_zone_schedules_the_job() -> None:
    when = datetime(2030, 1, 1, 9, tzinfo=timezone(timedelta(hours=2)))
    job = build(run_at=when)
    assert job.state == JobState.SCHEDULED
    assert job.run_at == when


def test_past_run_at_is_still_scheduled_for_promotion() -> None:
    assert build(run_at=datetime.now(UTC) - timedelta(days=1)).state == JobState.SCHEDULED


# -- metadata, args, ordering_key ----------------------------------------------------------


@pytest.mark.parametrize("metadata", [["a"], "text", 1, ("k", "v")])
def test_metadata_must_be_a_dict(metadata: object) -> None:
    with pytest.raises(ValidationError, match="metadata must be a dict"):
        build(metadata=metadata)


def test_metadata_must_be_json() -> None:
    with pytest.raises(SerializationError, match="metadata"):
        build(metadata={"when": datetime.now(UTC)})


def test_metadata_rejects_nul_bytes() -> None:
    with pytest.raises(ValidationError, match="NUL"):
        build(metadata={"note": "a\x00b"})


def test_metadata_rejects_lone_surrogates() -> None:
    with pytest.raises(ValidationError, match=r"^metadata\['note'\]: contains a lone surrogate"):
        build(metadata={"note": "\ud800"})


def test_metadata_is_encoded_as_compact_json() -> None:
    assert build(metadata={"a": [1, "ü"]}).metadata == '{"a":[1,"ü"]}'


def test_args_errors_surface_from_build() -> None:
    with pytest.raises(SerializationError):
        build({"s": {1, 2}}, kind="k")
    with pytest.raises(ValidationError, match="NUL"):
        build({"s": "\x00"}, kind="k")
    with pytest.raises(ValidationError, match="explicit kind"):
        build({"s": 1})


@pytest.mark.parametrize("key", ["nul\x00", "lone\udc00", 5, ["k"]])
def test_ordering_key_must_be_a_clean_string(key: object) -> None:
    with pytest.raises(ValidationError, match="ordering_key"):
        build(ordering_key=key)
