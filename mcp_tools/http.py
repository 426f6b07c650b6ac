"""The JSON answers /mcp gives before the SDK sees a request (401, 403, 429, 503): one way to send them."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Send


async def send_json(send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    """A whole JSON response: status, content type and length, then `headers` (lower-case names), then the body."""
    raw = json.dumps(body).encode()
    extra = [(name.encode(), value.encode()) for name, value in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()), *extra],
        }
    )
    await send({"type": "http.response.body", "body": raw})
