"""Serve /mcp WITHOUT authentication, for the official MCP conformance suite only.

    CHARMING_MCP_CONFORMANCE_NO_AUTH=1 .venv/bin/python .ci/conformance_server.py --port 8765

The suite sends no token. This entry point lets it in as a throw-away user, and cannot expose real
data by accident: it refuses to start unless the variable above is set, it listens on loopback
only, and it ignores DATABASE_URL, serving a fresh SQLite database in a temporary directory that is
deleted on exit. The normal application (charming.asgi) has no such switch.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

# A CI script, not part of the application: run from the repository's .ci/ directory.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ENABLE_VARIABLE = "CHARMING_MCP_CONFORMANCE_NO_AUTH"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
logger = logging.getLogger("charming.conformance_server")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to listen on")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    if os.environ.get(ENABLE_VARIABLE) != "1":
        print(f"Refusing to serve /mcp without authentication: set {ENABLE_VARIABLE}=1 (tests only).", file=sys.stderr)
        return 2
    if args.host not in LOOPBACK:
        print(f"Refusing to listen on {args.host!r} without authentication: loopback only.", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="charming-conformance-") as workdir:
        os.environ["DATABASE_URL"] = f"sqlite:///{workdir}/conformance.sqlite3"
        os.environ["CHARMING_PUBLIC_URL"] = f"http://localhost:{args.port}"
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
        import django

        django.setup()
        return _serve(args.host, args.port)


def _serve(host: str, port: int) -> int:
    import uvicorn
    from django.contrib.auth import get_user_model
    from django.core.asgi import get_asgi_application
    from django.core.management import call_command
    from starlette.types import Receive, Scope, Send

    from apps_registry.services.apps import app_create
    from charming.serving import NoDelayHttpToolsProtocol
    from mcp_tools.asgi import CharmingASGI
    from mcp_tools.auth import Caller, run_as
    from mcp_tools.server import session_manager_build

    call_command("migrate", verbosity=0, interactive=False)
    user = get_user_model().objects.create(username="conformance")
    app_create(owner=user, name="Conformance", description="A throw-away app for the conformance suite.")
    caller = Caller(user=user, token_id=None)
    session_manager = session_manager_build()

    async def unauthenticated(scope: Scope, receive: Receive, send: Send) -> None:
        await run_as(caller, session_manager.handle_request, scope, receive, send)

    application: Any = CharmingASGI(get_asgi_application(), session_manager, mcp_app=unauthenticated)
    logging.basicConfig(level=logging.WARNING)
    logger.warning(
        "!!! SERVING /mcp WITHOUT AUTHENTICATION on http://%s:%s/mcp for the conformance suite, as user %r, "
        "on a throw-away database. Never run this outside tests. !!!",
        host,
        port,
        user.username,
    )
    # The protocol docs/operations.md serves with (uvicorn's stock httptools one keeps header whitespace).
    uvicorn.run(application, host=host, port=port, lifespan="on", log_level="warning", http=NoDelayHttpToolsProtocol)
    return 0


if __name__ == "__main__":
    sys.exit(main())
