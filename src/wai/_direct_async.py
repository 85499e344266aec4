"""One statement on a connection of the client's own pool, through libpq, without a cursor.

The single insert is one short statement whose client cost is mostly psycopg's cursor
machinery (a cursor and a transformer per call, the query's conversion and its
prepared-statement bookkeeping). Here the statement is sent with psycopg's ``pq`` layer
and its C generators: a statement prepared once per connection under a name of ours
(or, on a connection without prepared statements, an unnamed one, as behind a
transaction-pooling PgBouncer), every parameter in text format typed by the server,
and the rows decoded by a transformer kept per connection.

Only for the client's own connections: autocommit, in no transaction and no pipeline.
A user's connection would miss psycopg's implicit ``BEGIN``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

from psycopg import AsyncConnection, adapt, errors, pq
from psycopg.abc import Transformer
from psycopg.generators import execute

from wai._sql import dollar_query

__all__ = ["Statement", "run_returning", "statement"]

_FATAL = pq.ExecStatus.FATAL_ERROR
_NO_STATEMENT = b"26000"  # invalid_sql_statement_name: the prepared statement is gone


@dataclass(slots=True)
class _State:
    """What wai keeps per connection: its prepared statements and a row transformer."""

    tx: Transformer
    prepared: set[bytes] = field(default_factory=set[bytes])


_states: WeakKeyDictionary[Any, _State] = WeakKeyDictionary()


#: A statement as :func:`run_returning` takes it: prepared name, text, parameter names.
Statement = tuple[bytes, bytes, tuple[str, ...]]


@functools.cache
def statement(name: str, schema: str) -> Statement:
    """Query ``name`` of ``schema``: its prepared statement's name, its text with ``$n``
    parameters, and the parameter names in order."""
    text, names = dollar_query(name, schema)
    return f"wai:{schema}:{name}".encode(), text.encode(), names


def _state(conn: AsyncConnection[Any]) -> _State:
    state = _states.get(conn)
    if state is None:
        state = _states[conn] = _State(adapt.Transformer(conn))
    return state


async def run_returning(
    conn: AsyncConnection[Any], stmt: Statement, values: list[bytes | None]
) -> list[tuple[Any, ...]]:
    """Run ``stmt`` (from :func:`statement`) with text ``values``; its rows as tuples.

    Prepared the first time on ``conn`` unless the connection prepares nothing
    (``prepare_threshold`` None); prepared again once if the server lost it (a
    ``DEALLOCATE`` or ``DISCARD ALL`` on the connection). A server error raises
    psycopg's exception for its SQLSTATE, as a cursor would.
    """
    state = _state(conn)
    name, text, _ = stmt
    pgconn = conn.pgconn
    async with conn.lock:
        if conn.prepare_threshold is None:
            pgconn.send_query_params(text, values)
            (result,) = await conn.wait(execute(pgconn))
        else:
            result = await _run_prepared(conn, state, name, text, values)
    if result.status == _FATAL:
        raise errors.error_from_result(result, encoding=conn.info.encoding)
    tx = state.tx
    tx.set_pgresult(result)
    return tx.load_rows(0, result.ntuples, tuple)


async def _run_prepared(
    conn: AsyncConnection[Any], state: _State, name: bytes, text: bytes, values: list[bytes | None]
) -> pq.abc.PGresult:
    pgconn = conn.pgconn
    for again in (False, True):
        if name not in state.prepared:
            pgconn.send_prepare(name, text)
            (result,) = await conn.wait(execute(pgconn))
            if result.status == _FATAL:
                return result
            state.prepared.add(name)
        pgconn.send_query_prepared(name, values)
        (result,) = await conn.wait(execute(pgconn))
        if (
            again
            or result.status != _FATAL
            or result.error_field(pq.DiagnosticField.SQLSTATE) != _NO_STATEMENT
        ):
            return result
        state.prepared.discard(name)
    raise AssertionError("unreachable")
