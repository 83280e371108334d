"""HTTP transport safety: loopback by default, and a bearer token on every request when one is configured."""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

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
