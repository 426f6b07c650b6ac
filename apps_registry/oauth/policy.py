"""Which redirect URIs a client may register (DCR and Client ID Metadata Documents alike), and which
resources a token may be issued for.

https anywhere; plain http only on a loopback address, the way native clients (Claude Code, the MCP
Inspector) receive the code (RFC 8252 section 7.3). Anything else could hand an authorization code to
whoever listens on a network.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings

LOOPBACK_HOSTS = frozenset({"localhost"})


def _is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redirect_uri_problem(uri: object) -> str | None:
    """Why `uri` may not be registered as a redirect URI, or None when it may."""
    if not isinstance(uri, str) or not uri:
        return "each redirect URI must be a non-empty string"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return f"redirect URI {uri!r} is not a valid URL"
    if parts.fragment or "#" in uri:
        return f"redirect URI {uri!r} must not contain a fragment"
    if parts.username is not None or parts.password is not None:
        return f"redirect URI {uri!r} must not contain user information"
    if parts.scheme not in ("https", "http"):
        return (
            f"redirect URI {uri!r} has scheme {parts.scheme!r}; only https (or http on a loopback address) is allowed"
        )
    host = parts.hostname or ""
    if not host:
        return f"redirect URI {uri!r} has no host"
    if parts.scheme == "https":
        return None
    if _is_loopback(host):
        return None
    return (
        f"redirect URI {uri!r} uses plain http on a non-loopback host; use https, or http on 127.0.0.1, "
        "[::1] or localhost for a native app"
    )


def redirect_uris_problem(uris: object) -> str | None:
    """The first problem with a client's `redirect_uris` list, or None when all may be registered."""
    if not isinstance(uris, list) or not uris:
        return "redirect_uris must be a non-empty array of URLs"
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem:
            return problem
    return None


def mcp_resource_url() -> str:
    """The MCP endpoint as an RFC 8707 resource: the audience of every token /mcp (and /mcp/apps/<id>) accepts."""
    return f"{settings.CHARMING_PUBLIC_URL}/mcp"


def app_mcp_url(app_id: object) -> str:
    """The MCP server of one app (mcp_tools/app_server.py), part of the /mcp resource."""
    return f"{mcp_resource_url()}/apps/{app_id}"


def resource_problem(resources: list[str]) -> str | None:
    """Why no token is issued for these RFC 8707 resources: this server serves only URLs under its own."""
    base = settings.CHARMING_PUBLIC_URL
    for resource in resources:
        if not (resource + "/").startswith(f"{base}/"):
            return f"The resource {resource!r} is not served here; ask for {base}/mcp (or another URL under {base}/)."
    return None
