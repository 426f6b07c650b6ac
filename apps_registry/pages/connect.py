"""The connect page's advice, one entry per host (the same as docs/mcp.md, "Connecting ..."): how each host signs
in (OAuth, by the URL alone), whether it needs a public https URL (Claude and ChatGPT connect from their own
servers), and the ready-to-paste configurations for a personal token instead."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

TOKEN_PLACEHOLDER = "YOUR_TOKEN"


@dataclass(frozen=True)
class HostConfig:
    host: str
    where: str
    text: str


@dataclass(frozen=True)
class HostAdvice:
    host: str
    steps: str  # what to do there, with the URL in it
    from_its_servers: bool  # it connects from the host's own servers: only a public https URL reaches Charming


def mcp_url() -> str:
    return f"{settings.CHARMING_PUBLIC_URL}/mcp"


def host_advice(*, url: str) -> list[HostAdvice]:
    """Each host's way in with the URL alone: it signs in here with OAuth, then the person approves."""
    vscode = json.dumps({"servers": {"charming": {"type": "http", "url": url}}})
    cursor = json.dumps({"mcpServers": {"charming": {"url": url}}})
    return [
        HostAdvice(
            "Claude (claude.ai, Claude Desktop)", "Settings → Connectors → Add custom connector; paste the URL.", True
        ),
        HostAdvice(
            "ChatGPT", "Settings → Connectors (developer mode) → Create; paste the URL, authentication OAuth.", True
        ),
        HostAdvice(
            "Claude Code",
            f"Run claude mcp add --transport http charming {url}, then /mcp in a session to sign in.",
            False,
        ),
        HostAdvice("VS Code", f"Add to .vscode/mcp.json: {vscode}; VS Code opens the browser to sign in.", False),
        HostAdvice("Cursor", f"Add to ~/.cursor/mcp.json: {cursor}, then choose Connect in Settings → MCP.", False),
    ]


def public_https_problem(url: str) -> str:
    """Why Claude and ChatGPT cannot reach `url` (not https, or a loopback, private or local name); "" if they can."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        local = host == "localhost" or host.endswith((".localhost", ".local", ".internal", ".lan")) or "." not in host
    else:
        local = not address.is_global
    if parts.scheme == "https" and not local:
        return ""
    why = "is not https" if not local and parts.scheme != "https" else "is not reachable from the internet"
    return (
        f"The URL of this server, {parts.scheme}://{parts.netloc}, {why}: Claude and ChatGPT connect from their own "
        "servers, so they need a public https URL. Serve Charming behind https at a public address and set "
        "CHARMING_PUBLIC_URL to it (docs/operations.md). Claude Code, VS Code and Cursor run on your computer and "
        "work with this URL as it is."
    )


def host_configs(*, url: str, token: str = TOKEN_PLACEHOLDER) -> list[HostConfig]:
    """Configurations that send a personal token instead of signing in (a host without OAuth, a headless agent):
    Claude Code, VS Code, Cursor and a generic JSON host, with `token` filled in."""
    headers = {"Authorization": f"Bearer {token}"}

    def dump(value: object) -> str:
        return json.dumps(value, indent=2)

    # Tokens are URL-safe characters, so double quotes are enough for any shell.
    claude = f'claude mcp add --transport http charming {url} --header "Authorization: Bearer {token}"'
    return [
        HostConfig(host="Claude Code", where="Run in a terminal", text=claude),
        HostConfig(
            host="VS Code",
            where=".vscode/mcp.json in your project",
            text=dump({"servers": {"charming": {"type": "http", "url": url, "headers": headers}}}),
        ),
        HostConfig(
            host="Cursor",
            where="~/.cursor/mcp.json",
            text=dump({"mcpServers": {"charming": {"url": url, "headers": headers}}}),
        ),
        HostConfig(
            host="Other MCP hosts",
            where="A JSON configuration of this shape (some hosts call the type “streamable-http”)",
            text=dump({"mcpServers": {"charming": {"type": "http", "url": url, "headers": headers}}}),
        ),
    ]
