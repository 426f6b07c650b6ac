"""Client half of benchmarks/sticky_sessions.sh: one 2025-11-25 session per token (5 list_apps, then an
elicited delete_app of the token owner's app), all concurrently; prints how many completed."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult


async def accept(context: object, params: object) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True})


async def one_session(url: str, token: str, app_id: str) -> str:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    try:
        async with Client(
            streamable_http_client(url, http_client=http), mode="legacy", elicitation_callback=accept
        ) as c:
            for _ in range(5):
                result = await c.call_tool("list_apps", {})
                if result.is_error:
                    return f"list_apps failed: {result}"
            result = await c.call_tool("delete_app", {"app_id": app_id})
            if result.is_error:
                return f"delete_app failed: {result}"
        return "ok"
    except Exception as error:  # a broken session surfaces as various transport errors
        return f"{type(error).__name__}: {str(error)[:120]}"


async def main(url: str, tokens_file: str) -> None:
    pairs = [line.split() for line in Path(tokens_file).read_text().splitlines() if line.strip()]
    results = await asyncio.gather(*(one_session(url, token, app_id) for token, app_id in pairs))
    done = sum(r == "ok" for r in results)
    print(f"{done}/{len(results)} sessions completed (5 list_apps + an elicited delete_app each)")
    for result in results:
        if result != "ok":
            print("   failed:", result)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
