"""What one row of the route table declares (:class:`Endpoint`), and what its handler gets."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from wai.client import AsyncClient
from wai.web._auth import Guard
from wai.web._params import Param

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["API_PREFIX", "Call", "Endpoint", "Handler"]

#: Where the API's paths start, under the app's mount point.
API_PREFIX = "/api/v1"


@dataclass(frozen=True, slots=True)
class Call:
    """One checked request: the client, its parameters by name, the app's mount point.

    ``args`` holds every path, query and body parameter of the endpoint, absent
    ones at their default. ``root_path`` is where the app is mounted (``""`` at
    the root), from the ASGI scope. ``request`` and ``guard`` (the app's
    authorization policy and its sessions) are for the few handlers that need
    more than the parameters: the session endpoints.
    """

    client: AsyncClient
    args: Mapping[str, Any]
    root_path: str
    request: Request
    guard: Guard


#: A handler: a checked request in, plain JSON data out (or a finished Starlette response,
#: for an answer that sets a cookie).
Handler = Callable[[Call], Awaitable[Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """One operation of the API: how it is routed, checked, run and documented.

    ``path`` is relative to :data:`API_PREFIX`, in OpenAPI's ``{name}`` form.
    ``body`` is None for an operation that reads no body, else the fields of its
    JSON object (none: ``{}`` or no body at all). ``calls`` names the client
    method(s) the handler calls; ``response`` is the JSON schema of a success;
    ``errors`` lists the statuses it can answer besides the ones every operation
    can (400, 503) and those of a mutation (401, 403).
    """

    method: Literal["GET", "POST", "PUT", "DELETE"]
    path: str
    operation_id: str
    tag: str
    summary: str
    description: str = ""
    calls: str
    handler: Handler
    path_params: tuple[Param, ...] = ()
    query: tuple[Param, ...] = ()
    body: tuple[Param, ...] | None = None
    response: Mapping[str, Any]
    mutates: bool = False
    errors: tuple[int, ...] = ()

    @property
    def full_path(self) -> str:
        """The OpenAPI path, under :data:`API_PREFIX`."""
        return API_PREFIX + self.path

    @property
    def route_path(self) -> str:
        """The Starlette path: a parameter that may hold ``/`` uses the ``path`` convertor."""
        path = self.full_path
        for param in self.path_params:
            if param.slashes:
                path = path.replace("{" + param.name + "}", "{" + param.name + ":path}")
        return path
