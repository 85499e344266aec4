"""The admin HTTP API of wai (``wai[http]``): JSON under ``/api/v1/``, documented by OpenAPI 3.1.

:func:`create_app` builds the Starlette app for an :class:`wai.AsyncClient`;
mount it in your own Starlette or FastAPI app, or run it with ``wai serve``::

    app.mount("/wai", wai.web.create_app(client, token=token, read_only=False))

Reads need no token; mutations need ``Authorization: Bearer <token>`` and are
refused (403) in read-only mode, the default. The schema is served at
``/api/v1/openapi.json``; ``docs/ui.md`` lists every endpoint and the client
method it calls.
"""

from __future__ import annotations

from wai.web._app import create_app
from wai.web._body import DEFAULT_MAX_BODY
from wai.web._endpoint import API_PREFIX

__all__ = ["API_PREFIX", "DEFAULT_MAX_BODY", "create_app"]
