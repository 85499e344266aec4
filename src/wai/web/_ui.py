"""The web UI's files: ``GET /`` is its page, ``GET /ui/...`` its scripts, styles and icon.

The files ship in the package (``wai/web/ui/``) and are read once, when the app is
built, into memory: a request names one of those files or gets a 404, so no path
it sends ever reaches the file system. Every answer carries the UI's security
headers: a Content-Security-Policy that allows only the app's own scripts, styles
and requests (no inline code, no other origin), no framing, no referrer, no
content sniffing. The page builds its DOM from API data with ``textContent`` only
(``tests/unit/test_web_ui_sources.py`` keeps it so).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from wai.web._encode import json_response
from wai.web._errors import ApiError

try:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("wai.web needs the http extra: pip install 'wai[http]'") from exc

__all__ = ["CONTENT_SECURITY_POLICY", "UI_DIR", "UI_HEADERS", "ui_routes"]

#: Where the UI's files are, in the installed package.
UI_DIR: Final = Path(__file__).resolve().parent / "ui"

#: Only the app's own files and API: no inline script or style, no other origin, no frames.
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

#: The security headers of every UI answer.
UI_HEADERS: Final = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
}

# Revalidated on each load (the ETag makes that a 304): an upgrade is seen at once.
_CACHE = {"Cache-Control": "no-cache"}

_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True, slots=True)
class _File:
    body: bytes
    media_type: str
    etag: str


def _load(directory: Path) -> dict[str, _File]:
    """Every servable file under ``directory``, by its path relative to it."""
    files: dict[str, _File] = {}
    for path in sorted(directory.rglob("*")):
        media_type = _TYPES.get(path.suffix)
        if not path.is_file() or media_type is None:
            continue
        body = path.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        files[path.relative_to(directory).as_posix()] = _File(body, media_type, etag)
    return files


def _answer(request: Request, file: _File) -> Response:
    headers = {**UI_HEADERS, **_CACHE, "ETag": file.etag}
    if request.headers.get("if-none-match") == file.etag:
        return Response(status_code=304, headers=headers)
    return Response(file.body, media_type=file.media_type, headers=headers)


def _not_found(request: Request) -> Response:
    error = ApiError(404, "not_found", f"no such file: {request.url.path}")
    return json_response(error.body(), error.status, {**UI_HEADERS, **error.headers})


def ui_routes(directory: Path = UI_DIR) -> list[Route]:
    """``GET /`` (the page) and ``GET /ui/{path}`` (its files), read from ``directory`` now."""
    files = _load(directory)
    index = files.get("index.html")
    if index is None:
        raise RuntimeError(
            f"the web UI is missing from the installation: no {directory}/index.html"
        )

    async def page(request: Request) -> Response:
        return _answer(request, index)

    async def asset(request: Request) -> Response:
        file = files.get(str(request.path_params["path"]))
        return _not_found(request) if file is None else _answer(request, file)

    return [
        Route("/", page, methods=["GET"], name="ui"),
        Route("/ui/{path:path}", asset, methods=["GET"], name="ui_asset"),
    ]
