"""``--json`` text: orjson's encoding, reading back exactly what ``json.dumps`` would write."""

from __future__ import annotations

import json
import types
import uuid
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from wai._job import JobState, Trigger
from wai.cli._tables import json_text, jsonable

AMSTERDAM_1900 = datetime(1900, 5, 1, 12, 0, tzinfo=ZoneInfo("Europe/Amsterdam"))  # +00:19:32


def _stdlib(value: Any) -> str:
    return json.dumps(jsonable(value), indent=2)


def test_the_layout_is_two_space_indents_in_field_order() -> None:
    at = datetime(2024, 5, 1, 12, 0, 0, 5, tzinfo=UTC)
    value = {"trigger": Trigger(job_id=1, run_lease=2, outcome="completed", spec="s"), "at": at}
    assert json_text(value) == (
        "{\n"
        '  "trigger": {\n'
        '    "job_id": 1,\n'
        '    "run_lease": 2,\n'
        '    "outcome": "completed",\n'
        '    "spec": "s"\n'
        "  },\n"
        '  "at": "2024-05-01T12:00:00.000005+00:00"\n'
        "}"
    )


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"naïve": 'José 😀 \u2028 \x7f \x00 \n \t " \\ /'}, id="escapes"),
        pytest.param([1.5e-7, 1e-05, 0.0001, 1e16, -0.0, 0.1, 5e-324, 2.0], id="floats"),
        pytest.param({"at": AMSTERDAM_1900, "empty": [], "none": {}}, id="offset-seconds"),
        pytest.param({"key": b"\x01\xff", "tags": ("a",), "set": frozenset({"x"})}, id="bytes"),
        pytest.param(types.MappingProxyType({"state": JobState.RUNNING}), id="mapping"),
        pytest.param({"id": uuid.UUID(int=7), "n": [2**63 - 1, -(2**63), True, None]}, id="ids"),
        pytest.param({"big": 2**70}, id="beyond-64-bits"),
        pytest.param({1: "a", "s": "\ud800"}, id="what-orjson-refuses"),
    ],
)
def test_the_text_reads_back_as_what_json_dumps_writes(value: Any) -> None:
    assert json.loads(json_text(value)) == json.loads(_stdlib(value))


def test_text_is_utf8_not_escaped() -> None:
    assert json_text({"name": "José 😀"}) == '{\n  "name": "José 😀"\n}'


def test_an_offset_with_seconds_keeps_them() -> None:
    assert json.loads(json_text({"at": AMSTERDAM_1900}))["at"].endswith("+00:19:32")


def test_a_value_json_cannot_hold_is_still_refused() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        json_text({"day": date(2024, 5, 1)})
