"""TCP keepalives of pooled and LISTEN connections: set unless the URL sets its own."""

from __future__ import annotations

from wai._connect import keepalives


def test_a_url_without_keepalives_gets_them() -> None:
    got = keepalives("postgresql://u@db.example:5432/app")
    assert got == {
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 4,
    }
    # idle 10 s, then 4 unanswered probes 5 s apart: a vanished peer within about 30 s
    assert got["keepalives_idle"] + got["keepalives_interval"] * got["keepalives_count"] == 30


def test_a_url_that_sets_any_keepalive_setting_is_left_alone() -> None:
    assert keepalives("postgresql://u@db/app?keepalives_idle=60") == {}
    assert keepalives("host=db dbname=app keepalives=0") == {}


def test_a_url_psycopg_cannot_read_gets_none() -> None:
    assert keepalives("postgresql://u@db/app?no_such_option=1") == {}
