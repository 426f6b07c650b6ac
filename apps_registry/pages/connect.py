"""Ready-to-paste configurations of MCP hosts for the connect page."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings

TOKEN_PLACEHOLDER = "YOUR_TOKEN"


@dataclass(frozen=True)
class HostConfig:
    host: str
    where: str
    text: str


def mcp_url() -> str:
    return f"{settings.CHARMING_PUBLIC_URL}/mcp"


def host_configs(*, url: str, token: str = TOKEN_PLACEHOLDER) -> list[HostConfig]:
    """Configurations for Claude Code, VS Code, Cursor and a generic JSON host, with `token` filled in."""
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
