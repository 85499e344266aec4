from __future__ import annotations

import pytest

from wai._text import storable
from wai.maintenance.outbox import describe


@pytest.mark.parametrize("text", ["", "plain ascii", "é ü 日本 🎉", "tab\tand\nnewline"])
def test_storable_text_comes_back_unchanged(text: str) -> None:
    assert storable(text) is text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\x00b", "a\\x00b"),
        ("\x00\x00", "\\x00\\x00"),
        ("lone \udc80 surrogate", "lone \\udc80 surrogate"),
        ("both \x00 and \ud800 é", "both \\x00 and \\ud800 é"),
    ],
)
def test_nul_and_lone_surrogates_become_readable_escapes(text: str, expected: str) -> None:
    result = storable(text)
    assert result == expected
    result.encode("utf-8")  # valid UTF-8: PostgreSQL text takes it
    assert "\x00" not in result


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_describe_names_the_type_and_never_fails() -> None:
    assert describe(TypeError("bad \x00 operand")) == "TypeError: bad \\x00 operand"
    assert describe(KeyError()) == "KeyError"
    assert describe(_Unprintable()) == "_Unprintable: <the exception's message could not be read>"
