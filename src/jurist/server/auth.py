"""Write access to the API: a bearer token (``JURIST_API_TOKEN``).

With a token configured, every write (``PUT /api/prompts/...``,
``POST /api/evaluation/analyze``, ``POST /api/evaluate``) needs
``Authorization: Bearer <token>``; reads stay open. With none configured the
server only listens on 127.0.0.1 (see :func:`bind_host`), so writes come from
this machine alone.
"""

from __future__ import annotations

import hmac
import ipaddress

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from jurist.server.state import get_state

LOOPBACK = "127.0.0.1"
_bearer = HTTPBearer(auto_error=False, description="JURIST_API_TOKEN, needed for writes when the server has one")


def require_write(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)
) -> None:
    """A FastAPI dependency for write routes: 401 without the configured token."""
    token = get_state(request).settings.api_token
    if not token:
        return  # no token: the server is bound to 127.0.0.1 only
    given = credentials.credentials if credentials is not None else ""
    if not hmac.compare_digest(given.encode(), token.encode()):
        raise HTTPException(401, "this write needs the API token: send 'Authorization: Bearer <JURIST_API_TOKEN>'",
                            headers={"WWW-Authenticate": "Bearer"})


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_host(host: str, token: str | None) -> tuple[str, str | None]:
    """The address to listen on and, when it differs from the one asked for, why.

    Without an API token the server listens on 127.0.0.1 only.
    """
    if token or is_loopback(host):
        return host, None
    return LOOPBACK, (f"no JURIST_API_TOKEN is set, so the API's writes are unprotected: listening on {LOOPBACK} "
                      f"only, not {host}. Set JURIST_API_TOKEN to serve other machines.")
