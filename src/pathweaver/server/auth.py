"""HTTP transport safety: loopback by default, and a bearer token on every request when one is configured."""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings

from pathweaver.config import ConfigError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to serve MCP over HTTP on {host} without a token: anyone who can reach this address could "
            "read your documents; pass --token (or set server.token / PATHWEAVER_SERVER_TOKEN), or bind to 127.0.0.1"
        )


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def loopback_security(host: str) -> TransportSecuritySettings | None:
    """The SDK's DNS-rebinding check for a loopback ``host``, on every spelling of it (``127.0.0.2``,
    ``LOCALHOST``), or None (the SDK's default: no check) for any other address, which needs a token anyway.

    The SDK turns the check on by itself only for exactly ``127.0.0.1``, ``localhost`` and ``::1``; on any other
    loopback spelling a web page could rename its own host to this address and read the notes. Allowed: a Host
    header with a loopback name (on any port, as an SSH tunnel forwards it), and a browser Origin on a loopback name
    (local tools such as the MCP Inspector); a page from anywhere else gets 421 (Host) or 403 (Origin)."""
    if not is_loopback(host):
        return None
    bound = host.strip().strip("[]")
    bound = f"[{bound}]" if ":" in bound else bound  # an IPv6 literal is bracketed in Host and Origin
    names = dict.fromkeys((bound, bound.lower(), *LOOPBACK_NAMES))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*names, *(f"{name}:*" for name in names)],
        allowed_origins=[f"{scheme}://{name}{suffix}" for name in names for scheme in ("http", "https")
                         for suffix in ("", ":*")],
    )


class BearerTokenMiddleware:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>`` (scheme in any case), else
    401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ConfigError("BearerTokenMiddleware needs a non-empty token")
        self.app = app
        self._expected = token.encode()

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers") or []:
            if name.lower() == b"authorization":
                scheme, _, credentials = bytes(value).strip().partition(b" ")
                # RFC 9110 §11.1: the auth scheme is case-insensitive
                return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self._expected)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "unauthorized", "detail": "missing or wrong bearer token"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="pathweaver"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
