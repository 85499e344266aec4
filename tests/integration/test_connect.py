"""Opening a client on a database that cannot be reached fails at once, saying what to do."""

from __future__ import annotations

import socket
import uuid

import pytest

import wai
from tests.conftest import create_database, database_url_for, drop_database


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


@pytest.fixture
def missing_database() -> str:
    return f"wai_test_missing_{uuid.uuid4().hex[:8]}"


async def test_a_missing_database_is_a_database_error_naming_it(missing_database: str) -> None:
    client = wai.AsyncClient(database_url_for(missing_database))
    with pytest.raises(wai.DatabaseError) as info:
        await client.open()
    message = str(info.value)
    assert f'database "{missing_database}"' in message
    assert "does not exist" in message
    assert "createdb" in message
    await client.close()


def test_the_sync_client_fails_the_same_way(missing_database: str) -> None:
    with pytest.raises(wai.DatabaseError, match="does not exist"):
        wai.Client(database_url_for(missing_database)).insert({"a": 1}, kind="k")


async def test_an_unreachable_server_is_a_database_error_that_hides_the_password() -> None:
    url = f"postgresql://someone:s3cret@127.0.0.1:{_closed_port()}/app"
    client = wai.AsyncClient(url)
    with pytest.raises(wai.DatabaseError) as info:
        await client.insert({"a": 1}, kind="k")  # opens on first use
    message = str(info.value)
    assert 'cannot connect to the database "app" on 127.0.0.1' in message
    assert "s3cret" not in message
    assert info.value.__cause__ is None  # one clear error, not the driver's chain


async def test_a_client_opens_once_the_database_exists(missing_database: str) -> None:
    client = wai.AsyncClient(database_url_for(missing_database))
    with pytest.raises(wai.DatabaseError):
        await client.open()
    create_database(missing_database)
    try:
        async with client:
            await client.migrate()
            row = await client.insert({"a": 1}, kind="k")
            assert (await client.get_job(row.id)).args == {"a": 1}
    finally:
        drop_database(missing_database)
