"""Who may use the server: the API token, the host names it answers to, where it listens.

One rule for ``jurist serve``, ``jurist serve --upstream`` and ``jurist proxy``
(docs/server.md, "Security"):

* Without a token (``JURIST_API_TOKEN``) the server listens on loopback only:
  :func:`listen_settings` refuses a non-loopback ``--host`` with the fix.
* With a token, every write (any method but GET, HEAD and OPTIONS: the proxy,
  ``POST /api/evaluate``, the analysis, prompt writes) and the tutor socket need
  it: ``Authorization: Bearer <token>``, or on the socket, for browsers, the
  subprotocol ``jurist.bearer.<base64url(token)>``.
* Requests must name the server by an allowed host (:func:`allowed_hosts`); answering to
  any host name (``*``) needs a token (:func:`require_token_for_any_host`): without one, a
  page on any site whose name resolves here could read and write as this machine does.

The checks themselves run in :mod:`jurist.server.guard`, before any body is read.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import errno
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from jurist.config import Settings
from jurist.errors import UsageError
from jurist.server.state import get_state

LOOPBACK = "127.0.0.1"
LOCAL_NAMES = ("127.0.0.1", "localhost", "::1")  # always allowed
ANY_HOST = "*"  # in allowed_hosts: answer to any host name (a reverse proxy checks them)
WILDCARD_ADDRESSES = ("0.0.0.0", "::")  # every interface: not a host name anybody sends
WS_PROTOCOL = "jurist"  # the subprotocol the tutor socket accepts
WS_TOKEN_PREFIX = "jurist.bearer."  # + base64url(token), unpadded: the token where a browser cannot set headers
_bearer = HTTPBearer(auto_error=False, description="JURIST_API_TOKEN, needed for writes when the server has one")


def token_matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def bearer(authorization: str | None) -> str | None:
    """The credentials of an ``Authorization: Bearer <x>`` header."""
    if authorization and authorization[:7].lower() == "bearer ":
        return authorization[7:].strip() or None
    return None


def ws_token(subprotocols: Iterable[str]) -> str | None:
    """The token a browser's socket sends as the subprotocol ``jurist.bearer.<base64url(token)>``."""
    for protocol in subprotocols:
        if protocol.startswith(WS_TOKEN_PREFIX):
            encoded = protocol[len(WS_TOKEN_PREFIX):]
            try:
                return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
            except (binascii.Error, UnicodeDecodeError):
                return None
    return None


def ws_subprotocol(subprotocols: Iterable[str]) -> str | None:
    """The subprotocol to accept the socket with: ``jurist`` when the client offered it."""
    return WS_PROTOCOL if WS_PROTOCOL in subprotocols else None


def require_write(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)
) -> None:
    """Marks a write route in the OpenAPI schema and checks the token again (the guard checked it
    before the body was read)."""
    token = get_state(request).settings.api_token
    if token and not token_matches(credentials.credentials if credentials is not None else None, token):
        raise HTTPException(401, "this write needs the API token: send 'Authorization: Bearer <JURIST_API_TOKEN>'",
                            headers={"WWW-Authenticate": "Bearer"})


def is_loopback(host: str) -> bool:
    host = normal_host(host)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normal_host(name: str) -> str:
    """A host name as compared: lower case, without IPv6 brackets or a trailing dot."""
    name = name.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name.rstrip(".")


def host_name(netloc: str) -> str:
    """The host name of a ``Host`` header or an origin's ``host[:port]`` (``[::1]:8000`` -> ``::1``)."""
    try:
        parsed = urlsplit(f"//{netloc}").hostname
    except ValueError:
        return ""
    return normal_host(parsed or "")


def allowed_hosts(settings: Settings) -> frozenset[str]:
    """The host names the server answers to: 127.0.0.1, localhost, ::1 and ``settings.allowed_hosts``."""
    return frozenset([*LOCAL_NAMES, *(normal_host(h) for h in settings.allowed_hosts)])


def require_token_for_any_host(settings: Settings) -> None:
    """A server that answers to any host name (``*`` in ``allowed_hosts``) needs an API token: a
    UsageError (exit 2) that names the fixes, before it serves anything."""
    if settings.api_token or ANY_HOST not in allowed_hosts(settings):
        return
    raise UsageError(
        "refusing to answer to any host name (--allowed-host '*') without an API token: a web page on any site "
        "whose name resolves to this server could then read the stored calls and write (DNS rebinding). Either "
        "name the host names to answer to (--allowed-host jurist.example.org, or allowed_hosts in jurist.yaml), "
        "or set a token first, e.g. export JURIST_API_TOKEN=$(python -c 'import secrets; "
        "print(secrets.token_urlsafe(32))'), and send it as 'Authorization: Bearer <token>'. "
        "See docs/server.md, \"Security\".")


def same_origin(origin: str, host: str) -> bool:
    """Whether a browser's ``Origin`` is this server as the request names it: the host and port of
    ``Host`` (http or https: TLS may end at a reverse proxy in front of the server)."""
    if origin == "null":
        return False
    try:
        parts = urlsplit(origin)
        origin_port = parts.port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    try:
        host_port = urlsplit(f"//{host}").port
    except ValueError:
        return False
    default = 443 if parts.scheme == "https" else 80
    return (normal_host(parts.hostname) == host_name(host)
            and (origin_port or default) == (host_port or default))


def bind_host(host: str, token: str | None) -> str:
    """``host``, if the server may listen there: a non-loopback address needs an API token."""
    if token or is_loopback(host):
        return host
    raise UsageError(
        f"refusing to listen on {host} without an API token: anyone who reaches the port could run the judges and "
        f"the proxy on your keys and read every stored prompt. Either listen on {LOOPBACK} (the default), or set a "
        "token first, e.g. export JURIST_API_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe(32))'), "
        "and send it as 'Authorization: Bearer <token>'. See docs/server.md, \"Security\".")


def require_free_port(host: str, port: int) -> None:
    """Before any banner: a port another process listens on is a UsageError that names the fix."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return  # not a busy port (an address of another machine, say): the server says what it says
            raise UsageError(f"cannot listen on {host}:{port}: the port is in use (another server may be "
                             f"running there); choose another port with --port, e.g. --port {port + 1}") from None


def listen_settings(settings: Settings, host: str, extra_hosts: Iterable[str] = ()) -> Settings:
    """The settings to serve with on ``host``: the bind rule checked (:func:`bind_host`), and the
    host names to answer to extended with ``extra_hosts`` (``--allowed-host``) and ``host`` itself
    (any host name only with a token: :func:`require_token_for_any_host`)."""
    bind_host(host, settings.api_token)
    names = [*settings.allowed_hosts, *extra_hosts]
    if host not in WILDCARD_ADDRESSES:
        names.append(host)
    unique = list(dict.fromkeys(normal_host(n) for n in names if n.strip()))
    out = settings.model_copy(update={"allowed_hosts": unique})
    require_token_for_any_host(out)
    return out
