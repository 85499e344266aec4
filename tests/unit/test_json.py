"""The JSON decoder of wai's connections gives exactly what the stdlib decoder gives."""

from __future__ import annotations

import json

import pytest

from wai._json import loads

DOCUMENTS = [
    '{"a": 1, "b": [1.5, "x", null, true, false], "c": {"d": "é☃😀"}}',
    "[]",
    "{}",
    '"text"',
    "12345678901234567890123",  # beyond 64 bits: orjson refuses, the stdlib reads it
    '{"big": -99999999999999999999999999}',
    "1e308",
    '"\\ud83d\\ude00"',
]


@pytest.mark.parametrize("doc", DOCUMENTS)
@pytest.mark.parametrize("wrap", [str, str.encode, lambda s: memoryview(s.encode())])
def test_loads_matches_the_stdlib(doc: str, wrap: object) -> None:
    assert loads(wrap(doc)) == json.loads(doc)  # type: ignore[operator]


def test_invalid_json_still_raises() -> None:
    with pytest.raises(json.JSONDecodeError):
        loads(b"{not json")
