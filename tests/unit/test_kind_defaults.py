"""A kind's defaults declared on its args type: every insert path and task registration."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
import pydantic
import pytest

import wai
from wai._followups import Spec, evaluate
from wai._inserts import EnqueueRequest, build_args_job, build_job, inserted_row
from wai._kinds import KindDefaults, declared, kind_of, kind_of_type
from wai._registry import Registry
from wai.cron import Periodic
from wai.errors import ValidationError


def nothing(_kind: str) -> None:
    return None


@wai.kind(queue="signup", priority=1, max_attempts=10, deadline=30)
@dataclass
class Signup:
    user_id: int


@wai.kind(name="billing.charge", queue="billing")
@dataclass
class Charge:
    cents: int


@wai.kind(max_attempts=3)
@dataclass
class OnlyAttempts:
    n: int


@dataclass
class Plain:
    n: int


def test_the_decorator_stores_one_frozen_declaration_on_the_class() -> None:
    assert declared(Signup) == KindDefaults(
        queue="signup", priority=1, max_attempts=10, deadline=30.0
    )
    assert Signup.__wai_kind__ is declared(Signup)  # pyright: ignore[reportAttributeAccessIssue]
    assert declared(Plain) is None
    with pytest.raises(AttributeError):
        declared(Signup).queue = "other"  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue, reportOptionalMemberAccess]


def test_a_declared_name_is_the_kind() -> None:
    assert kind_of(Charge(cents=1)) == "billing.charge"
    assert kind_of(Charge) == "billing.charge"
    assert kind_of_type(Charge) == "billing.charge"
    assert kind_of(Signup(user_id=1)) == "signup"


def test_a_subclass_does_not_inherit_the_declaration() -> None:
    @dataclass
    class Child(Charge):
        pass

    assert declared(Child) is None
    assert kind_of(Child(cents=1)) == "child"
    assert build_args_job(Child(cents=1), default_queue=nothing).queue == "default"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"queue": "a b"}, "invalid queue name"),
        ({"name": "no spaces"}, "invalid job kind"),
        ({"priority": 5}, "priority must be an integer from 1 to 4"),
        ({"priority": True}, "priority must be"),
        ({"max_attempts": 0}, "max_attempts must be"),
        ({"deadline": math.inf}, "deadline"),
        ({"deadline": -1}, "deadline"),
    ],
)
def test_invalid_declarations_are_refused_when_made(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        wai.kind(**options)


def test_a_type_declares_once() -> None:
    with pytest.raises(ValidationError, match="Signup already declares"):
        wai.kind(queue="other")(Signup)
    defaults = declared(Signup)
    assert defaults is not None
    assert defaults.queue == "signup"


def test_dicts_and_non_classes_cannot_declare() -> None:
    class Payload(dict[str, Any]):
        pass

    with pytest.raises(ValidationError, match="dict args have no type"):
        wai.kind(queue="q")(Payload)
    with pytest.raises(ValidationError, match="decorates an args class"):
        wai.kind(queue="q")(lambda: None)  # pyright: ignore[reportArgumentType]


def test_pydantic_models_and_msgspec_structs_declare_too() -> None:
    @wai.kind(queue="models")
    class Model(pydantic.BaseModel):
        n: int

    @wai.kind(queue="structs")
    class Struct(msgspec.Struct):
        n: int

    assert build_args_job(Model(n=1), default_queue=nothing).queue == "models"
    assert build_job(EnqueueRequest(Struct(n=1)), default_queue=nothing).queue == "structs"


# -- inserts --------------------------------------------------------------------------


def test_an_insert_without_a_registry_takes_the_declared_defaults() -> None:
    for job in (
        build_job(EnqueueRequest(Signup(user_id=1)), default_queue=nothing),
        build_args_job(Signup(user_id=1), default_queue=nothing),
    ):
        assert (job.kind, job.queue, job.priority, job.max_attempts) == ("signup", "signup", 1, 10)


def test_explicit_insert_options_override_the_declaration() -> None:
    job = build_job(
        EnqueueRequest(Signup(user_id=1), queue="urgent", priority=4, max_attempts=2),
        default_queue=nothing,
    )
    assert (job.queue, job.priority, job.max_attempts) == ("urgent", 4, 2)


def test_the_declaration_wins_over_the_inserting_clients_registry() -> None:
    job = build_job(
        EnqueueRequest(Signup(user_id=1)),
        default_queue=lambda _k: "elsewhere",
        default_max_attempts=lambda _k: 99,
    )
    assert (job.queue, job.max_attempts) == ("signup", 10)


def test_what_the_declaration_leaves_unset_falls_back_to_the_registry() -> None:
    args = OnlyAttempts(n=1)
    for job in (
        build_job(EnqueueRequest(args), default_queue=lambda _k: "registered"),
        build_args_job(args, default_queue=lambda _k: "registered"),
    ):
        assert (job.queue, job.priority, job.max_attempts) == ("registered", 2, 3)
    job = build_args_job(args, default_queue=nothing)
    assert job.queue == "default"


def test_another_kind_for_the_same_type_takes_none_of_its_defaults() -> None:
    job = build_job(EnqueueRequest(Signup(user_id=1), kind="legacy_signup"), default_queue=nothing)
    assert (job.kind, job.queue, job.priority, job.max_attempts) == (
        "legacy_signup",
        "default",
        2,
        25,
    )
    same = build_job(EnqueueRequest(Signup(user_id=1), kind="signup"), default_queue=nothing)
    assert same.queue == "signup"


def test_dict_args_use_explicit_options_else_the_registry_else_the_global_defaults() -> None:
    request = EnqueueRequest({"user_id": 1}, kind="signup")
    assert build_job(request, default_queue=nothing).queue == "default"
    assert build_job(request, default_queue=lambda _k: "registered").queue == "registered"


def test_a_follow_up_takes_the_declared_defaults_of_what_its_closure_returns() -> None:
    now = datetime.now(UTC)
    row = inserted_row(build_args_job(Plain(n=1), default_queue=nothing), 1, now, now)
    spec = Spec(
        kind="plain",
        outcome="completed",
        fn=lambda args, job: Signup(user_id=args["n"]),
        with_request=False,
        name="s",
    )
    job = evaluate(spec, {"n": 1}, row, {}, default_queue=nothing, default_max_attempts=nothing)
    assert (job.queue, job.priority, job.max_attempts) == ("signup", 1, 10)
    assert job.trigger == (1, 0, "completed", "s")


def test_a_cron_schedule_takes_the_declared_queue_and_budget() -> None:
    job = Periodic.build("signups", "@daily", Signup(user_id=1)).job(nothing, nothing)
    assert (job.queue, job.max_attempts) == ("signup", 10)


# -- task registration ----------------------------------------------------------------


def test_a_task_of_a_declared_type_takes_its_defaults() -> None:
    task = Registry().add_task(Signup, lambda job: None)
    assert (task.kind, task.queue, task.max_attempts, task.deadline) == ("signup", "signup", 10, 30)
    same = Registry().add_task(Signup, lambda job: None, queue="signup", max_attempts=10)
    assert same.queue == "signup"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"queue": "other"}, "queue='other' (declared: 'signup')"),
        ({"max_attempts": 3}, "max_attempts=3 (declared: 10)"),
        ({"deadline": 5}, "deadline=5.0 (declared: 30.0)"),
    ],
)
def test_a_task_that_contradicts_the_declaration_is_refused(
    options: dict[str, Any], named: str
) -> None:
    registry = Registry()
    with pytest.raises(ValidationError) as info:
        registry.add_task(Signup, lambda job: None, **options)
    assert named in str(info.value)
    assert "Signup already declares its kind's defaults" in str(info.value)
    assert registry.tasks == {}


def test_a_task_may_not_add_what_the_declaration_left_unset() -> None:
    with pytest.raises(ValidationError, match="queue='mail' \\(declared: 'default'\\)"):
        Registry().add_task(OnlyAttempts, lambda job: None, queue="mail")
    assert Registry().add_task(OnlyAttempts, lambda job: None, queue="default").queue == "default"


def test_a_task_declares_its_options_onto_an_undeclared_type() -> None:
    @dataclass
    class Report:
        month: int

    task = Registry().add_task(Report, lambda job: None, queue="reports", max_attempts=4)
    assert declared(Report) == KindDefaults(queue="reports", max_attempts=4)
    assert (task.queue, task.max_attempts) == ("reports", 4)
    # Any insert of the type, whichever registry it consults, now agrees with the task.
    job = build_args_job(Report(month=5), default_queue=nothing)
    assert (job.queue, job.max_attempts) == ("reports", 4)
    # A second client of the process takes the same defaults, and may not contradict them.
    assert Registry().add_task(Report, lambda job: None).queue == "reports"
    with pytest.raises(ValidationError, match="queue='other'"):
        Registry().add_task(Report, lambda job: None, queue="other")


def test_a_task_without_options_pins_the_global_defaults() -> None:
    @dataclass
    class Quiet:
        n: int

    assert Registry().add_task(Quiet, lambda job: None).queue == "default"
    assert declared(Quiet) == KindDefaults()
    with pytest.raises(ValidationError, match="queue='loud'"):
        Registry().add_task(Quiet, lambda job: None, queue="loud")


def test_tasks_by_name_or_under_another_kind_declare_nothing() -> None:
    @dataclass
    class Shared:
        n: int

    registry = Registry()
    registry.add_task("by_name", lambda job: None, queue="named")
    task = registry.add_task(Shared, lambda job: None, kind="shared_v2", queue="v2")
    assert (task.kind, task.queue) == ("shared_v2", "v2")
    assert declared(Shared) is None


def test_a_declared_name_is_the_task_kind() -> None:
    registry = Registry()
    task = registry.add_task(Charge, lambda job: None)
    assert (task.kind, task.queue) == ("billing.charge", "billing")
    assert registry.queue_of("billing.charge") == "billing"
