"""The admin HTTP API fuzzed with schemathesis, from its own OpenAPI document, on real rows.

Each operation gets, on a database holding jobs in every state (one the follow-up of
another), dead-letter entries, an outbox row, two schedules and three queues:

- schemathesis's coverage cases: boundary and out-of-range values, wrong types, missing
  and unknown fields, other methods and media types (deterministic), with the token;
- Hypothesis-drawn valid cases, then invalid ones (schemathesis's positive and negative
  modes), half of them naming rows that exist, each sent with the admin token, without
  an ``Authorization`` header, or with any other one.

Every answer must be:

- never a 5xx;
- a 4xx: a JSON ``Error`` (``{"error": {"code", "message"}}``, ``application/json``)
  whose code is the one its status stands for, and nothing written: a digest of the
  tables an action could touch is the same before and after;
- a 2xx: the documented response schema with every model object closed (an
  undocumented field fails); a read writes nothing; a mutation's writes are the new
  baseline;
- what schemathesis's response checks accept: a documented status, content type,
  headers and schema, and invalid data refused;
- for a valid case, a 400 only for a rule a JSON schema cannot state
  (:data:`ALLOWED_REFUSALS`): any other means the document allows too much.

The same runs on a read-only app, where every mutation is a 403 and nothing changes.
Hypothesis is derandomized and bounded per operation, so every run sends the same cases.

The app and its client live on the test's event loop; Hypothesis runs in a thread and
hands each case to that loop, so the client's pool only ever sees one loop.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import core as hypothesis_core
from hypothesis import strategies as st
from hypothesis.vendor.pretty import RepresentationPrinter
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core import NotSet
from schemathesis.core.result import Ok
from schemathesis.generation.coverage import GenerationSession
from schemathesis.generation.drivers import CoverageGenerator
from schemathesis.generation.feedback import FeedbackSources
from schemathesis.generation.hypothesis import setup as schemathesis_setup
from schemathesis.generation.overrides import Override
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import wai
from tests.integration._helpers import Work, fetch
from tests.integration.test_admin import STATES, make
from tests.integration.test_dlq import dead
from tests.integration.test_web_api import BASE, TOKEN, conforms, http, refused
from wai.web import create_app
from wai.web._endpoint import Endpoint
from wai.web._openapi import document
from wai.web._routes import ROUTES

pytestmark = pytest.mark.timeout(120)

T = TypeVar("T")

#: Hypothesis cases per operation and mode (valid, invalid) on the app that takes mutations.
EXAMPLES = 30
#: The same on the read-only app, where every mutation stops at the guard.
READ_ONLY_EXAMPLES = 10


def _keep_hypothesis_printing() -> None:
    """Let schemathesis patch Hypothesis now, then give Hypothesis its printer back.

    On first use schemathesis patches Hypothesis for the whole process (once), among other
    things with a printer that prints nothing: every property test that fails later in
    this pytest worker would show a blank falsifying example. (A case prints nothing
    either way: each failure here carries the request and the answer in a note.)
    """
    schemathesis_setup()
    hypothesis_core.RepresentationPrinter = RepresentationPrinter  # pyright: ignore[reportPrivateImportUsage]


_CONFIG = schemathesis.Config()  # built here: no schemathesis.toml on the machine applies
_CONFIG.projects.default.generation.update(with_security_parameters=False)  # auth is ours
SCHEMA = schemathesis.openapi.from_dict(document(ROUTES, ""), config=_CONFIG)

#: Every operation of the document, by operationId.
OPERATIONS = {
    result.ok().definition.raw["operationId"]: result.ok()
    for result in SCHEMA.get_all_operations()
    if isinstance(result, Ok)  # a part schemathesis cannot read fails the test below
}
ENDPOINTS = {e.operation_id: e for e in ROUTES}


def closed(schema: Any) -> Any:
    """``schema`` with every object that lists its properties closed to any other."""
    if isinstance(schema, list):
        return [closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: closed(value) for key, value in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


_DOCUMENT = document(ROUTES, "")
_CLOSED_COMPONENTS = closed(_DOCUMENT["components"])


def strictly_conforms(response: httpx.Response, endpoint: Endpoint) -> None:
    """The answer matches the documented schema of a success, with every object closed."""
    op = _DOCUMENT["paths"][endpoint.full_path][endpoint.method.lower()]
    schema = op["responses"]["200"]["content"]["application/json"]["schema"]
    jsonschema.validate(response.json(), {**closed(schema), "components": _CLOSED_COMPONENTS})


#: schemathesis's checks of one answer (none of them sends a request of its own).
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]

#: The error codes each status stands for (docs/ui.md).
CODES = {
    400: {"bad_request"},
    401: {"unauthorized"},
    403: {"read_only"},
    404: {"not_found"},
    405: {"method_not_allowed"},
    409: {"invalid_state", "unique_conflict"},
    413: {"payload_too_large"},
    415: {"unsupported_media_type"},
    429: {"too_many_requests"},  # sign-in after too many wrong tokens from one address
}

#: Why a valid case (schemathesis's positive mode) may still be a 400: rules a JSON schema
#: cannot state. Any other 400 of a valid case means the document allows too much.
ALLOWED_REFUSALS = re.compile(
    "|".join(
        [
            "without a filter would touch every dead-letter entry",  # a filter, or "all": true
            "invalid dead-letter cursor",  # `before` is opaque: only an entry's cursor is one
            "invalid waiting-job cursor",  # `after` is opaque: only a waiting job's cursor is one
            "must be earlier than created_before",  # a time range, not two times
            r"must be an integer, got -?\d+\.0\b",  # 2.0 is a JSON Schema integer; the API wants 2
        ]
    )
)

#: The Authorization header of a drawn case: the admin token (half the time, so that
#: mutations run), none, or any other text.
AUTHORIZATION = st.one_of(
    st.just(f"Bearer {TOKEN}"),
    st.just(f"Bearer {TOKEN}"),
    st.none(),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60).map(str.strip),
)

#: Queue names for path parameters: the seeded ones, and dot segments (valid queue names
#: that reach the API only percent-encoded, as schemathesis sends them).
QUEUES = ("q", "dq", "other", ".", "..")
#: Kind names for path parameters: the seeded jobs' kind, one with a rate limit, dot segments.
KINDS = ("work", "charge", ".", "..")
SCHEDULES = ("nightly", "reports/daily")

# One round trip: a digest of every row of each table an action could touch.
_DIGEST = (
    "SELECT"
    " (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM wai.jobs t),"
    " (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM wai.dlq t),"
    " (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM wai.queues t),"
    " (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), ''))"
    " FROM wai.kind_limits t),"
    " (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), ''))"
    " FROM wai.cron_schedules t),"
    " (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM wai.outbox t),"
    " (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), ''))"
    " FROM wai.runtime_instances t)"
)


async def digest(client: wai.AsyncClient) -> tuple[Any, ...]:
    """Digests of jobs, dlq, queues, kind_limits, cron_schedules, outbox and runtime_instances."""
    [row] = await fetch(client, _DIGEST)
    return row


Known = dict[str, tuple[Any, ...]]


async def seed(client: wai.AsyncClient) -> Known:
    """Rows for every operation to find; the path parameter values that name them.

    Seeded again before each stage of a mutation: the cases before may have
    cancelled, retried, purged or deleted what the last seed made.
    """
    jobs = [(await make(client, state)).id for state in STATES]
    parent, child = jobs[STATES.index("completed")], jobs[STATES.index("available")]
    await fetch(
        client,
        "UPDATE wai.jobs SET trigger_job_id = %s, trigger_run_lease = 1,"
        " trigger_outcome = 'completed', trigger_spec = 'next' WHERE id = %s",
        (parent, child),
    )
    entries = [(await dead(client, queue="dq", tags=(tag,))).id for tag in ("x", "y")]
    owing = await make(client, "running", queue="other")
    await client.cancel(owing.id)  # a bare client holds no spec: its follow-ups are owed
    outbox = tuple(row[0] for row in await fetch(client, "SELECT id FROM wai.outbox"))
    await client.upsert_cron()  # stores again a schedule a case deleted
    await client.set_kind_rate_limit("q", "charge", wai.RateLimit(5))  # again if a case lifted it
    return {
        "job_id": (*jobs, owing.id),
        "dlq_id": tuple(entries),
        "outbox_id": outbox,
        "queue": QUEUES,
        "kind": KINDS,
        "cron": SCHEDULES,
    }


def drawn(operation_id: str, mode: GenerationMode, known: Known) -> st.SearchStrategy[Case]:
    """Cases of one mode: half with schemathesis's path parameters, half naming known rows."""
    op = OPERATIONS[operation_id]
    anywhere = op.as_strategy(generation_mode=mode)
    if not op.path_parameters:
        return anywhere

    def values(name: str) -> tuple[Any, ...]:
        if name == "name":
            return known["queue" if op.path.startswith("/api/v1/queues/") else "cron"]
        if op.path.startswith("/api/v1/dlq/"):
            return known["dlq_id"]
        return known[name]

    existing = st.fixed_dictionaries(
        {p.name: st.sampled_from(values(p.name)) for p in op.path_parameters}
    ).flatmap(lambda path: op.as_strategy(generation_mode=mode, path_parameters=path))
    return st.one_of(anywhere, existing)


def coverage(operation_id: str) -> list[Case]:
    """schemathesis's coverage cases of the operation, valid and invalid (deterministic)."""
    # A session of its own: a shared one skips what other operations' cases already tried
    # (another method on the same path), so the cases would depend on the test order.
    session = GenerationSession()
    try:
        return list(
            CoverageGenerator(
                operation=OPERATIONS[operation_id],
                generation_modes=list(GenerationMode),
                generation_config=SCHEMA.config.generation,
                auth_storage=None,
                override=Override(),
                feedback=FeedbackSources(),
                session=session,
            )
        )
    finally:
        session.close()


@dataclass
class Run:
    """One fuzzed app: the loop it lives on, and what the tables held after its last write."""

    api: httpx.AsyncClient
    client: wai.AsyncClient
    on_loop: Callable[[Coroutine[Any, Any, Any]], Any]
    read_only: bool
    baseline: tuple[Any, ...] = ()
    known: Known = field(default_factory=dict)
    statuses: Counter[int] = field(default_factory=Counter)

    def refresh(self, operation_id: str) -> None:
        """Seed once, and again before each stage of a mutation that can run; take a baseline."""
        if not self.known or (ENDPOINTS[operation_id].mutates and not self.read_only):
            self.known = self.on_loop(seed(self.client))
        self.baseline = self.on_loop(digest(self.client))

    def send(self, case: Case, authorization: str | None) -> tuple[httpx.Response, tuple[Any, ...]]:
        """Send ``case`` with this Authorization header: the answer, and the digests after it."""
        kwargs = case.as_transport_kwargs(base_url=BASE)
        headers = {k: v for k, v in kwargs["headers"].items() if k.lower() != "authorization"}
        if authorization is not None:
            headers["Authorization"] = authorization
        unknown = set(kwargs) - {"method", "url", "headers", "params", "cookies", "json", "data"}
        assert not unknown, f"a transport argument this test does not send: {unknown}"
        assert not kwargs.get("cookies"), "the API reads no cookie: none should be generated"
        data = kwargs.get("data")

        async def call() -> tuple[httpx.Response, tuple[Any, ...]]:
            response = await self.api.request(
                kwargs["method"],
                kwargs["url"],
                params=kwargs.get("params"),
                headers=headers,
                json=kwargs.get("json"),
                content=data.encode() if isinstance(data, str) else data,
            )
            return response, await digest(self.client)

        return self.on_loop(call())

    def check(self, operation_id: str, case: Case, authorization: str | None) -> None:
        """Send one case; check its answer, and that it wrote only if it succeeded."""
        response, after = self.send(case, authorization)
        self.statuses[response.status_code] += 1
        try:
            self._judge(ENDPOINTS[operation_id], case, response, after)
        except Exception as exc:
            body = "none" if isinstance(case.body, NotSet) else repr(case.body)[:300]
            exc.add_note(
                f"request: {case.method} {response.request.url}\n"
                f"Authorization: {authorization!r}\nbody: {body}\n"
                f"answer: {response.status_code} {response.text[:500]}"
            )
            raise

    def _judge(
        self, endpoint: Endpoint, case: Case, response: httpx.Response, after: tuple[Any, ...]
    ) -> None:
        status = response.status_code
        assert status < 500, "a server error"
        case.validate_response(response, checks=CHECKS)
        if status >= 400:
            error = refused(response, status)
            assert error["code"] in CODES[status], "the wrong code for the status"
            if status == 400 and case.meta and case.meta.generation.mode.is_positive:
                assert ALLOWED_REFUSALS.search(error["message"]), "a valid request refused"
            if status == 401:
                assert response.headers["www-authenticate"] == "Bearer"
            if self.read_only and endpoint.mutates and case.method == endpoint.method:
                # The guard runs before anything else: only a path that routes nowhere escapes.
                assert status == 403 or error["message"].startswith("no such endpoint")
            assert after == self.baseline, "refused, yet it wrote"
            return
        assert case.method == endpoint.method, "a success for an undocumented method"
        assert not (self.read_only and endpoint.mutates), "a read-only app mutated"
        conforms(response, case.method, endpoint.path)
        strictly_conforms(response, endpoint)
        if endpoint.mutates:
            self.baseline = after
        else:
            assert after == self.baseline, "a read wrote"


def fuzz(run: Run, operation_id: str, examples: int) -> None:
    """The coverage cases of ``operation_id``, then ``examples`` drawn cases of each mode."""
    _keep_hypothesis_printing()
    run.refresh(operation_id)
    for case in coverage(operation_id):
        run.check(operation_id, case, f"Bearer {TOKEN}")
    op = OPERATIONS[operation_id]
    negatable = bool(op.path_parameters or op.query or op.body)
    for mode in [GenerationMode.POSITIVE] + [GenerationMode.NEGATIVE] * negatable:
        run.refresh(operation_id)

        @settings(
            max_examples=examples,
            derandomize=True,
            database=None,
            deadline=None,
            phases=(Phase.explicit, Phase.generate, Phase.shrink),
            # Slow (a database round trip per case) and filtered draws are expected here.
            suppress_health_check=[
                HealthCheck.too_slow,
                HealthCheck.filter_too_much,
                HealthCheck.data_too_large,
                HealthCheck.large_base_example,
            ],
            report_multiple_bugs=False,
        )
        @given(case=drawn(operation_id, mode, run.known), authorization=AUTHORIZATION)
        def one(case: Case, authorization: str | None) -> None:
            run.check(operation_id, case, authorization)

        one()


def _on_loop(loop: asyncio.AbstractEventLoop) -> Callable[[Coroutine[Any, Any, T]], T]:
    """Run a coroutine on ``loop`` (the test's) from another thread, and wait for it."""

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=60)

    return run


def _schedules(client: wai.AsyncClient) -> None:
    client.periodic("nightly", "0 3 * * *", Work(), queue="q")
    client.periodic("reports/daily", "@daily", Work(n=1), queue="q")


OPERATION_IDS = [e.operation_id for e in ROUTES]


def test_every_operation_of_the_document_is_fuzzed() -> None:
    assert sorted(OPERATIONS) == sorted(OPERATION_IDS)


@pytest.mark.parametrize("operation_id", OPERATION_IDS)
async def test_fuzz_with_mutations_enabled(aclient: wai.AsyncClient, operation_id: str) -> None:
    _schedules(aclient)
    async with http(create_app(aclient, token=TOKEN, read_only=False)) as api:
        run = Run(api, aclient, _on_loop(asyncio.get_running_loop()), read_only=False)
        await asyncio.to_thread(fuzz, run, operation_id, EXAMPLES)
    if operation_id == "signIn":
        # a generated token is never the admin token: signing in is refused (401, then 429
        # from the limit); tests/integration/test_web_session.py signs in for real
        assert run.statuses.keys() >= {401, 429}
    else:
        assert 200 in run.statuses  # the cases reached the operation, not only its refusals


@pytest.mark.parametrize("operation_id", OPERATION_IDS)
async def test_fuzz_read_only(aclient: wai.AsyncClient, operation_id: str) -> None:
    _schedules(aclient)
    async with http(create_app(aclient)) as api:
        run = Run(api, aclient, _on_loop(asyncio.get_running_loop()), read_only=True)
        await asyncio.to_thread(fuzz, run, operation_id, READ_ONLY_EXAMPLES)
    if ENDPOINTS[operation_id].mutates:
        assert 403 in run.statuses
