"""The shapes of the claim and finalize statements, and which batches need their rows."""

from __future__ import annotations

import pytest

from wai._job import ROW_COLUMNS
from wai._registry import Registry
from wai._sql import QUERIES


def _returning(name: str) -> list[str]:
    # the claim returns its rows from a CTE (claimed) that its last RETURNING ends
    text = QUERIES[name].text.rsplit("RETURNING", 1)[1].split("\n)", 1)[0].rstrip().rstrip(";")
    return [item.split()[0].removeprefix("j.") for item in text.split(",")]


@pytest.mark.parametrize(
    "name", ["job_claim", "job_claim_limited", "job_claim_id", "job_finalize_many"]
)
def test_claim_and_finalize_return_the_row_columns_in_order(name: str) -> None:
    assert _returning(name) == list(ROW_COLUMNS)


def test_the_lean_finalize_returns_id_and_state_only() -> None:
    assert _returning("job_finalize_many_ids") == ["id", "state::text"]


def test_the_two_finalize_statements_differ_only_by_what_they_return() -> None:
    def body(name: str) -> str:
        return QUERIES[name].text.rsplit("RETURNING", 1)[0]

    assert body("job_finalize_many") == body("job_finalize_many_ids")


def test_a_row_is_read_when_a_spec_matches_or_a_hook_listens() -> None:
    registry = Registry()
    assert not registry.reads_row("send_email", "completed")
    registry.add_spec(
        "send_email", "exhausted", lambda args, job: None, with_request=False, name="alert"
    )
    assert registry.reads_row("send_email", "exhausted")
    assert not registry.reads_row("send_email", "completed")  # another outcome
    assert not registry.reads_row("resize", "exhausted")  # another kind
    registry.add_hook("resize", lambda event: None)
    assert registry.reads_row("resize", "completed")
    assert not registry.reads_row("charge", "completed")
    registry.add_hook("*", lambda event: None)
    assert registry.reads_row("charge", "completed")
