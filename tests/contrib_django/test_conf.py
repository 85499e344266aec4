"""``settings.WAI`` validation, the conninfo of a DATABASES entry, the psycopg 3 check."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings
from psycopg.conninfo import conninfo_to_dict

import wai
from wai.contrib.django import WaiSettings, wai_settings
from wai.contrib.django._conf import conninfo_from
from wai.contrib.django._insert import psycopg_connection


def test_defaults_when_wai_is_not_set() -> None:
    with override_settings(WAI={}):
        assert wai_settings() == WaiSettings(database="default", schema="wai", app=None)


def test_settings_are_read() -> None:
    with override_settings(WAI={"SCHEMA": "jobs", "APP": "proj.tasks:client"}):
        assert wai_settings() == WaiSettings("default", "jobs", "proj.tasks:client")


@pytest.mark.parametrize(
    ("wai_setting", "message"),
    [
        (["default"], r"settings.WAI must be a dict .* got list"),
        ({"DATABSE": "x"}, r"unknown keys DATABSE; the keys are DATABASE, SCHEMA, APP"),
        ({"DATABASE": "replica"}, r"is 'replica', which settings.DATABASES does not"),
        ({"DATABASE": 3}, r"settings.WAI\['DATABASE'\] must be a string, got int 3"),
        ({"SCHEMA": "Bad-Name"}, r"settings.WAI\['SCHEMA'\]: invalid schema name"),
        ({"APP": "tasks.client"}, r"settings.WAI\['APP'\]: APP must be 'module:attribute'"),
        ({"DATABASE": "lite"}, r"uses ENGINE 'django.db.backends.sqlite3': wai needs"),
    ],
)
def test_bad_settings_say_what_is_wrong(wai_setting: Any, message: str) -> None:
    with override_settings(WAI=wai_setting), pytest.raises(wai.ValidationError, match=message):
        wai_settings()


def test_conninfo_carries_every_part_quoted() -> None:
    info = conninfo_from(
        {
            "NAME": "shop",
            "USER": "app",
            "PASSWORD": "it's a secret",
            "HOST": "db.internal",
            "PORT": 6432,
            "OPTIONS": {"sslmode": "require", "application_name": "shop web"},
        }
    )
    assert conninfo_to_dict(info) == {
        "dbname": "shop",
        "user": "app",
        "password": "it's a secret",
        "host": "db.internal",
        "port": "6432",
        "sslmode": "require",
        "application_name": "shop web",
    }


def test_conninfo_leaves_out_what_is_empty_or_not_libpq() -> None:
    options = {"isolation_level": 1, "server_side_binding": True, "pool": True}
    info = conninfo_from({"NAME": "", "USER": "", "HOST": "", "PORT": "", "OPTIONS": options})
    assert conninfo_to_dict(info) == {"dbname": "postgres"}  # as Django connects


def test_conninfo_of_a_service_names_no_database() -> None:
    info = conninfo_from({"NAME": "", "OPTIONS": {"service": "shop"}})
    assert conninfo_to_dict(info) == {"service": "shop"}


def test_conninfo_refuses_an_option_libpq_does_not_know() -> None:
    with pytest.raises(wai.ValidationError, match=r"\['OPTIONS'\] has 'colour', which is not"):
        conninfo_from({"NAME": "shop", "OPTIONS": {"colour": "blue"}}, alias="default")


class connection:
    pass


def test_a_psycopg2_connection_is_refused_saying_to_install_psycopg_3() -> None:
    with pytest.raises(wai.ValidationError, match=r"install psycopg 3") as info:
        psycopg_connection(connection())
    assert "tests.contrib_django.test_conf.connection" in str(info.value)
