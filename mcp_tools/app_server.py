"""One MCP server per app: `/mcp/apps/<app id>` serves the app's routes as tools.

Each route is a tool named after it, with the route's input schema as its inputSchema, the query_app/mutate_app
envelope around the route's output schema as its outputSchema, the route's description, and annotations read off
its steps (apps_registry.routes.effects). A call runs the route exactly as query_app or mutate_app would (same
service, same envelope, same roles); a mutation takes apps:write like mutate_app, refused with the same HTTP 403
step-up challenge.

The endpoint takes the same tokens as /mcp (its protected resource, whose audience they carry). Before the SDK sees
a request, `AppBearerAuth` authenticates it, reads the app's routes for the caller (404 when the app does not exist
or the caller may not see it) and puts them in `current_app`; the handlers read that. A 2025-11-25 session stays
with the app it was opened on, and is sent notifications/tools/list_changed when the app's definition changed since
it last listed the tools; on 2026-07-28, a subscriptions/listen stream watches the app's version and carries the
same notification.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from django.conf import settings
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import ListenHandler, ServerEvent, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from apps_registry import selectors
from apps_registry.access import READ, WRITE, app_for, role_allows, scope_check
from apps_registry.exceptions import AccessDenied, NotFound
from apps_registry.models import Route
from apps_registry.redaction import redact
from apps_registry.routes.effects import route_effects
from apps_registry.values import clip_repr
from mcp_tools.auth import BearerAuth, Caller, current_caller, run_as
from mcp_tools.contracts import contract_load
from mcp_tools.http import send_json
from mcp_tools.results import envelope_error, error_result
from mcp_tools.sessions import UserCappedSessionManager
from mcp_tools.tools import ToolCall, ToolResult, db, run_route

logger = logging.getLogger(__name__)

APP_PATH = re.compile(r"^/mcp/apps/(?P<app_id>[^/]+)/?$")
SERVER_NAME = "charming-app"
KIND_NEED = {"query": "query", "mutation": "mutate"}
KIND_SCOPE = {"query": READ, "mutation": WRITE}
ENVELOPE_CONTRACT = {"query": "query_app", "mutation": "mutate_app"}
SESSIONS_REMEMBERED = 100_000


@dataclass(frozen=True)
class AppRoutes:
    """The app a request to /mcp/apps/<id> is for, as its caller sees it: its version and each route's kind."""

    app_id: str
    name: str
    role: str
    version: int
    kinds: dict[str, str]
    session_id: str | None = None  # the 2025-11-25 session the request belongs to, if any


current_app: contextvars.ContextVar[AppRoutes | None] = contextvars.ContextVar("charming_mcp_app", default=None)


def app_routes_for(user: Any, app_id: str) -> AppRoutes:
    """The app `app_id` if `user` may see it (NotFound otherwise, as for a missing one), with its routes' kinds."""
    app, role = app_for(actor=user, app_id=app_id, need="read")
    kinds = dict(selectors.routes_of(app).values_list("name", "kind"))
    return AppRoutes(app_id=str(app.id), name=app.name, role=role, version=app.version, kinds=kinds)


def _value_schema(output_schema: dict[str, Any] | None, generic: dict[str, Any], where: str) -> dict[str, Any]:
    """The route's output schema as the envelope's `value`. One with `$ref`s ("#..." within itself) becomes an
    embedded schema resource with its own `$id`, so its references still resolve inside it."""
    if output_schema is None:
        return generic
    schema = _without_fractional_steps(copy.deepcopy(output_schema))
    if "$ref" in json.dumps(schema):
        schema["$id"] = where
    else:
        schema.pop("$schema", None)
    schema.setdefault("description", generic["description"])
    return schema


# Keywords whose values are data, not schemas: a `multipleOf` key inside them is the author's data.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})


def _without_fractional_steps(schema: Any) -> Any:
    """`schema` (modified in place) without its fractional `multipleOf` steps, such as money's 0.01.

    Clients check a result against the tool's output schema with plain float division: for Python's jsonschema
    (the SDK's) and ajv, 19.99 is not a multiple of 0.01. The server checks every value against the route's own
    schema first, with jsonschema-rs, which allows for binary floating point. So the step is left to that check
    rather than make clients refuse ordinary amounts. Whole-number steps stay: they divide exactly."""
    if isinstance(schema, dict):
        step = schema.get("multipleOf")
        if isinstance(step, float) and not step.is_integer():
            del schema["multipleOf"]
        for key, value in schema.items():
            if key not in _DATA_KEYWORDS:
                _without_fractional_steps(value)
    elif isinstance(schema, list):
        for item in schema:
            _without_fractional_steps(item)
    return schema


def tool_for_route(app_id: str, route: Route) -> dict[str, Any]:
    """The MCP tool a route is served as."""
    envelope = contract_load(ENVELOPE_CONTRACT[route.kind])["outputSchema"]
    output = copy.deepcopy(envelope)
    where = f"urn:charming:app:{app_id}:route:{route.name}:output"
    output["properties"]["value"] = _value_schema(route.output_schema, envelope["properties"]["value"], where)
    effects = route_effects(kind=route.kind, definition=route.definition or {})
    title = (route.hints or {}).get("title")
    tool: dict[str, Any] = {
        "name": route.name,
        "description": route.description or f"The {route.kind} {route.name} of this app.",
        # MCP wants an object schema; a route's params are always an object, whether or not its schema says so.
        "inputSchema": {"type": "object", **(route.input_schema or {})},
        "outputSchema": output,
        "annotations": {
            "readOnlyHint": effects.read_only,
            "destructiveHint": effects.destructive,
            "idempotentHint": effects.idempotent,
            "openWorldHint": False,
        },
    }
    if isinstance(title, str) and title:
        tool["title"] = tool["annotations"]["title"] = title
    return tool


def _tools_of(user: Any, app_id: str, scopes: frozenset[str]) -> tuple[int, list[dict[str, Any]]]:
    """The app's version and the tools of its routes whose scope is in `scopes` (Caller.listed_scopes)."""
    app, _role = app_for(actor=user, app_id=app_id, need="read")
    routes = [route for route in selectors.routes_of(app) if KIND_SCOPE[route.kind] in scopes]
    return app.version, [tool_for_route(str(app.id), route) for route in routes]


# The definition version each 2025-11-25 session (by id) last listed or was told changed: a session is sent
# notifications/tools/list_changed once per change, on its next call. Insertion-ordered and bounded.
_versions_seen: dict[str, int] = {}


def _remember(remembered: dict[str, Any], key: str, value: Any) -> None:
    remembered.pop(key, None)
    remembered[key] = value
    while len(remembered) > SESSIONS_REMEMBERED:
        del remembered[next(iter(remembered))]


async def _tell_if_changed(ctx: ServerRequestContext[Any, Any], app: AppRoutes) -> None:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or app.session_id is None:
        return  # stateless: tools/list is never cached (ttlMs 0), so the next list is current
    seen = _versions_seen.get(app.session_id)
    if seen is not None and seen != app.version:
        _remember(_versions_seen, app.session_id, app.version)
        await ctx.session.send_tool_list_changed()


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    caller, app = current_caller_and_app()
    version, tools = await db(_tools_of, caller.user, app.app_id, caller.listed_scopes)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return types.ListToolsResult.model_validate({"tools": tools, "ttlMs": 0, "cacheScope": "private"})
    if app.session_id is not None:
        _remember(_versions_seen, app.session_id, version)
    return types.ListToolsResult.model_validate({"tools": tools})


async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> ToolResult:
    caller, app = current_caller_and_app()
    await _tell_if_changed(ctx, app)
    kind = app.kinds.get(params.name)
    if kind is None:
        shown = clip_repr(redact(params.name))
        available = ", ".join(sorted(app.kinds)) or "none (the app has no routes yet)"
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {shown}. Available: {available}.")
    arguments = {"app_id": app.app_id, "op": params.name, "params": params.arguments or {}}
    try:
        scope_check(scopes=caller.scopes, need=KIND_NEED[kind])  # type: ignore[arg-type]
        if kind == "mutation" and not role_allows(app.role, "mutate"):
            return _mutation_refused(app)  # route_run checks the role again, as it runs (the role may change)
        call = ToolCall(user=caller.user, arguments=arguments, params=params, ctx=ctx)
        if kind == "query":
            return await run_route.handle_query(call)
        return await run_route.handle_mutate(call)
    except Exception as error:  # noqa: BLE001 - domain errors become their envelope, anything else a generic one
        return error_result(error, envelope=True, tool=params.name)


def _mutation_refused(app: AppRoutes) -> ToolResult:
    """query_app's refusal of a viewer's mutation, in this server's words (its tools, not query_app)."""
    queries = ", ".join(name for name, kind in sorted(app.kinds.items()) if kind == "query") or "none"
    message = (
        f"You are {'an' if app.role[0] in 'aeiou' else 'a'} {app.role} of app '{app.name}'; {app.role}s may only "
        f"call its read-only tools ({queries}). Ask the owner for editor access to change its data."
    )
    denied = AccessDenied(message, app_id=app.app_id, app_name=app.name, role=app.role, need="mutate")
    return envelope_error(denied.as_envelope_error(message))


def current_caller_and_app() -> tuple[Caller, AppRoutes]:
    caller, app = current_caller.get(), current_app.get()
    if caller is None or app is None:  # AppBearerAuth always sets both; fail closed if it did not
        raise MCPError(code=types.INTERNAL_ERROR, message="Internal error: the request reached no app.")
    return caller, app


class AppVersionBus:
    """The per-app servers' subscriptions/listen events: nothing publishes; each stream watches its own app's
    definition version (a save in any worker, by any transport, moves it) and hears ToolsListChanged when it moves."""

    async def publish(self, event: ServerEvent) -> None:
        return None

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        # Called by the listen handler in the request's context, where AppBearerAuth put the caller and the app.
        caller, app = current_caller_and_app()
        watch = asyncio.get_running_loop().create_task(_watch_version(caller, app, listener))

        def unsubscribe() -> None:
            watch.cancel()

        return unsubscribe


async def _watch_version(caller: Caller, app: AppRoutes, listener: Callable[[ServerEvent], None]) -> None:
    version = app.version
    while True:
        await asyncio.sleep(float(settings.CHARMING_MCP_APP_LISTEN_POLL_SECONDS))
        try:
            current = (await db(app_routes_for, caller.user, app.app_id)).version
        except NotFound:
            return  # the caller can no longer see the app: nothing more to tell
        except Exception as error:  # noqa: BLE001 - an outage: try again at the next tick
            logger.warning("listen stream of app %s could not read its version (%s)", app.app_id, error)
            continue
        if current != version:
            version = current
            listener(ToolsListChanged())


class UserCappedListenHandler(ListenHandler):
    """The SDK's listen handler with at most CHARMING_MCP_APP_LISTENS_PER_USER open streams per user (each polls)."""

    def __init__(self, bus: AppVersionBus) -> None:
        super().__init__(bus)
        self._open_per_user: dict[str, int] = {}

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        caller, _app = current_caller_and_app()
        user = str(caller.user.pk)
        cap = int(settings.CHARMING_MCP_APP_LISTENS_PER_USER)
        if self._open_per_user.get(user, 0) >= cap:
            raise MCPError(
                code=types.INVALID_REQUEST,
                message=f"You already have {cap} listen streams open on app servers "
                "(CHARMING_MCP_APP_LISTENS_PER_USER); close one before opening another.",
            )
        self._open_per_user[user] = self._open_per_user.get(user, 0) + 1
        try:
            return await super().__call__(ctx, params)
        finally:
            self._open_per_user[user] -= 1
            if not self._open_per_user[user]:
                del self._open_per_user[user]


class AppServer(Server[Any]):
    def create_initialization_options(self, *args: Any, **kwargs: Any) -> InitializationOptions:
        # 2025-11-25 sessions are told when the app's routes change (notifications/tools/list_changed).
        if not args and "notification_options" not in kwargs:
            kwargs["notification_options"] = NotificationOptions(tools_changed=True)
        return super().create_initialization_options(*args, **kwargs)


def app_server_build() -> AppServer:
    from mcp_tools.server import SERVER_VERSION

    server = AppServer(
        SERVER_NAME,
        version=SERVER_VERSION,
        title="A Charming app",
        instructions=(
            "This server is one Charming app: each tool is one of its routes. Read-only tools query the app's "
            "data; the others change it. Results are {ok, value?, error?, advisories?}."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=UserCappedListenHandler(AppVersionBus()),
    )
    # No OpenTelemetry spans, as on /mcp (mcp_tools/server.py says why).
    server.middleware[:] = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    return server


def app_session_manager_build() -> UserCappedSessionManager:
    """The session manager of every /mcp/apps/<id> endpoint (one per process, like /mcp's)."""
    from mcp_tools.server import session_manager_build

    return session_manager_build(app_server_build())


def _app_scope(app: AppRoutes, name: str) -> str | None:
    kind = app.kinds.get(name)
    return KIND_SCOPE[kind] if kind else None


class AppBearerAuth(BearerAuth):
    """/mcp's bearer authentication, then the app of the path as the caller sees it (404 when they cannot)."""

    def __init__(self, app: Any) -> None:
        super().__init__(app)
        # Which app each 2025-11-25 session was opened on: a session id presented on another app's path is unknown.
        # Insertion-ordered and bounded: the oldest are forgotten first (their sessions have long expired).
        self._session_apps: dict[str, str] = {}

    async def serve(self, caller: Caller, scope: Scope, receive: Receive, send: Send) -> None:
        match = APP_PATH.match(scope["path"])
        app_id = match.group("app_id") if match else ""
        try:
            app = await db(app_routes_for, caller.user, app_id)
        except NotFound as error:
            await send_json(send, 404, {"error": "not_found", "error_description": error.message})
            return
        session_id = _header(scope, b"mcp-session-id")
        if session_id is not None and self._session_apps.get(session_id, app.app_id) != app.app_id:
            await send_json(send, 404, {"error": "not_found", "error_description": "Session not found."})
            return
        token = current_app.set(dataclasses.replace(app, session_id=session_id))
        try:
            noting = self._noting_sessions(send, app)
            await run_as(caller, self.app, scope, receive, noting, scope_of=lambda name: _app_scope(app, name))
        finally:
            current_app.reset(token)

    def _noting_sessions(self, send: Send, app: AppRoutes) -> Send:
        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers") or []:
                    if name.lower() == b"mcp-session-id":
                        _remember(self._session_apps, value.decode("latin-1"), app.app_id)
            await send(message)

        return noting


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers") or []:
        if name.lower() == wanted:
            return value.decode("latin-1")
    return None
