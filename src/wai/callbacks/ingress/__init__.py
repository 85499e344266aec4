"""The HTTP callback ingress: signed ``POST /callbacks/{callback_id}/{action}`` (``wai[http]``).

:func:`create_callback_app` builds the Starlette app (mount it in your own app);
:func:`serve` runs it with uvicorn (``wai callbacks serve APP``). Senders sign
their requests with :func:`wai.callbacks.signing.sign`, re-exported here with
:func:`callback_url` and :func:`verify`.
"""

from __future__ import annotations

from wai.callbacks.ingress._app import DEFAULT_MAX_BODY, RETRY_AFTER, create_callback_app
from wai.callbacks.ingress._serve import serve
from wai.callbacks.signing import InvalidSignature, callback_url, sign, verify

__all__ = [
    "DEFAULT_MAX_BODY",
    "RETRY_AFTER",
    "InvalidSignature",
    "callback_url",
    "create_callback_app",
    "serve",
    "sign",
    "verify",
]
