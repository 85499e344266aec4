"""The OpenAPI 3.1 document of the admin API, built from the route table and the model views.

Every operation, parameter, body field and answer comes from an
:class:`~wai.web._endpoint.Endpoint`; the model schemas from
:mod:`wai.web._schemas`. The one server is the app's mount point (the ASGI
``root_path``), so the paths are right wherever the app is mounted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from wai._version import __version__
from wai.web._endpoint import Endpoint
from wai.web._params import Param
from wai.web._schemas import components, ref
from wai.web._session import COOKIE, CSRF_HEADER

__all__ = ["MUTATION_SECURITY", "document"]

_DESCRIPTION = (
    "The admin API of wai, a PostgreSQL job queue: jobs, queues, the dead-letter queue, "
    "periodic schedules, runtime instances and the follow-up outbox. Reads need no token. "
    "Mutations need `Authorization: Bearer <token>`, or the `wai_session` cookie of a "
    "browser signed in with `POST /api/v1/session` together with its `X-CSRF-Token` header, "
    "and answer 403 while the app is read-only. Every error is "
    '`{"error": {"code": ..., "message": ...}}`. Unknown or repeated query parameters are '
    "refused (400)."
)

#: What a mutation needs: the bearer token, or a signed-in session's cookie and CSRF token.
MUTATION_SECURITY: Final[list[dict[str, list[str]]]] = [
    {"bearerAuth": []},
    {"sessionCookie": [], "csrfToken": []},
]

#: The error answers, by status: (component name, description).
_ERRORS: Final = {
    400: ("BadRequest", "a malformed parameter or body, or a request wai refuses"),
    401: ("Unauthorized", "the token is missing or wrong, or the session expired"),
    403: (
        "Forbidden",
        "the app is read-only (`read_only`), or a session cookie came without its CSRF "
        "token (`csrf_failed`)",
    ),
    404: ("NotFound", "no such job, entry, schedule or outbox row"),
    409: ("Conflict", "the action does not apply to the current state, or a unique key is held"),
    413: ("PayloadTooLarge", "the body exceeds the size limit"),
    415: ("UnsupportedMediaType", "the body is not application/json"),
    429: ("TooManyRequests", "too many wrong tokens from this address: wait `Retry-After`"),
    503: ("Unavailable", "the database is unreachable or its schema not migrated"),
}


def _error_response(status: int) -> dict[str, Any]:
    _, description = _ERRORS[status]
    answer: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": ref("Error")}},
    }
    if status == 401:
        answer["headers"] = {
            "WWW-Authenticate": {"schema": {"type": "string"}, "description": "`Bearer`"}
        }
    if status in (429, 503):
        answer["headers"] = {
            "Retry-After": {"schema": {"type": "integer"}, "description": "seconds to wait"}
        }
    return answer


def _schema(param: Param) -> dict[str, Any]:
    schema = param.type.schema()
    if param.default is not None:
        schema["default"] = param.default
    return schema


def _parameter(param: Param, where: str) -> dict[str, Any]:
    return {
        "name": param.name,
        "in": where,
        "required": where == "path" or param.required,
        "description": param.description,
        "schema": _schema(param),
    }


def _body(fields: Sequence[Param]) -> dict[str, Any]:
    properties = {f.name: {**_schema(f), "description": f.description} for f in fields}
    required = [f.name for f in fields if f.required]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return {
        "required": bool(required),
        "description": "a JSON object; an empty body is `{}`" if fields else "none, or `{}`",
        "content": {"application/json": {"schema": schema}},
    }


def _statuses(endpoint: Endpoint) -> list[int]:
    statuses = {400, 503, *endpoint.errors}
    if endpoint.mutates:
        statuses |= {401, 403}
    if endpoint.body is not None:
        statuses |= {413, 415}
    return sorted(statuses)


def operation(endpoint: Endpoint) -> dict[str, Any]:
    """The OpenAPI operation object of ``endpoint``."""
    description = endpoint.description
    if endpoint.calls != "(none)":
        description = f"{description}\n\nCalls `client.{endpoint.calls}`.".strip()
    op: dict[str, Any] = {
        "operationId": endpoint.operation_id,
        "tags": [endpoint.tag],
        "summary": endpoint.summary,
        "description": description,
        "parameters": [_parameter(p, "path") for p in endpoint.path_params]
        + [_parameter(p, "query") for p in endpoint.query],
        "responses": {
            "200": {
                "description": "success",
                "content": {"application/json": {"schema": dict(endpoint.response)}},
            },
            **{
                str(status): {"$ref": f"#/components/responses/{_ERRORS[status][0]}"}
                for status in _statuses(endpoint)
            },
        },
        "x-wai-mutates": endpoint.mutates,
    }
    if endpoint.body is not None:
        op["requestBody"] = _body(endpoint.body)
    if endpoint.mutates:
        op["security"] = MUTATION_SECURITY
    return op


def document(endpoints: Sequence[Endpoint], root_path: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``endpoints``, served from under ``root_path``."""
    paths: dict[str, dict[str, Any]] = {}
    tags: list[str] = []
    for endpoint in endpoints:
        paths.setdefault(endpoint.full_path, {})[endpoint.method.lower()] = operation(endpoint)
        if endpoint.tag not in tags:
            tags.append(endpoint.tag)
    return {
        "openapi": "3.1.0",
        "info": {"title": "wai admin API", "version": __version__, "description": _DESCRIPTION},
        "servers": [{"url": root_path or "/", "description": "where the app is mounted"}],
        "tags": [{"name": tag} for tag in tags],
        "paths": paths,
        "components": {
            "schemas": components(),
            "responses": {name: _error_response(status) for status, (name, _) in _ERRORS.items()},
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "the admin token (wai serve --token-env NAME)",
                },
                "sessionCookie": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": COOKIE,
                    "description": "a browser session, set by `POST /api/v1/session`",
                },
                "csrfToken": {
                    "type": "apiKey",
                    "in": "header",
                    "name": CSRF_HEADER,
                    "description": "the session's CSRF token, answered by `/api/v1/session`",
                },
            },
        },
    }
