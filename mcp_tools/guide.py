"""The server's resources and prompt: the authoring guide agents read before writing an app, the MCP Apps view
(mcp_tools.ui), and the build_app prompt.

The guide is docs/agent-guide.md, served verbatim as `charming://guide/authoring` (text/markdown).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import mcp_types as types
from django.conf import settings
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_tools.ui import APP_UI_RESOURCE, APP_UI_URI, app_ui_contents

GUIDE_URI = "charming://guide/authoring"
GUIDE_MIME_TYPE = "text/markdown"
# -32002: the MCP specification's error code for a resource that does not exist.
RESOURCE_NOT_FOUND = -32002
BUILD_APP = "build_app"

GUIDE_RESOURCE = types.Resource(
    uri=GUIDE_URI,
    name="authoring-guide",
    title="How to write a Charming app",
    description=(
        "The author format for create_app, update_app and check_app: the document, routes, every step kind "
        "with an example, CEL variables, tests, versions, limits, and how each error reads."
    ),
    mime_type=GUIDE_MIME_TYPE,
)


@cache
def guide_text() -> str:
    return (settings.BASE_DIR / "docs" / "agent-guide.md").read_text(encoding="utf-8")


async def list_resources(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[GUIDE_RESOURCE, APP_UI_RESOURCE], ttl_ms=0, cache_scope="private")


async def read_resource(
    ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == GUIDE_URI:
        contents = types.TextResourceContents(uri=GUIDE_URI, mime_type=GUIDE_MIME_TYPE, text=guide_text())
    elif uri == APP_UI_URI:
        contents = app_ui_contents()
    else:
        raise MCPError(
            code=RESOURCE_NOT_FOUND,
            message=f"Resource not found: {uri[:200]!r}. Available: {GUIDE_URI}, {APP_UI_URI}.",
        )
    return types.ReadResourceResult(contents=[contents], ttl_ms=0, cache_scope="private")


BUILD_APP_PROMPT = types.Prompt(
    name=BUILD_APP,
    title="Build a Charming app",
    description=(
        "Walks through building a new Charming app for the user: gather what it must do, write a definition "
        "with tests, check it with check_app, create it with create_app, then try it."
    ),
    arguments=[
        types.PromptArgument(
            name="idea",
            description="What the user wants the app to do, in their words (e.g. 'track my daily habits').",
            required=False,
        )
    ],
)


def build_app_text(idea: str | None) -> str:
    wanted = f"The user wants: {idea.strip()}\n\n" if idea and idea.strip() else ""
    return (
        f"{wanted}Build a Charming app for the user, step by step.\n\n"
        f"1. Read the authoring guide (resources/read {GUIDE_URI}) if you have not yet.\n"
        "2. Gather the requirements from the user: what they want to record and see, which fields each record "
        "has (and their types: dates, numbers, text), what must be refused (e.g. empty titles, negative "
        "amounts), and who else will use it. Ask only what you cannot sensibly decide yourself.\n"
        "3. Design the collections and the routes: a mutation for each change the user makes, a query for "
        'each view. Give every route an input schema with "additionalProperties": false and the right '
        '"format" (date, email, ...), and an output schema.\n'
        "4. Write the definition with tests: at least one test per route for the normal case, and one per "
        "refusal (expect an error kind and a message fragment); list records_after for mutations.\n"
        "5. Call check_app with the definition. Fix every problem it lists (each has a path) and every failing "
        "test, and repeat until valid and passed are both true.\n"
        "6. Call create_app with the definition. Tell the user the app exists and what it can do.\n"
        "7. Try it with mutate_app and query_app on the user's behalf only if they agree.\n"
        "8. Later changes: get_app_source, edit the definition, update_app with expected_version; a conflict "
        "means someone saved in between: read the source again and reapply. update_app with restore_version "
        "undoes a bad save."
    )


async def list_prompts(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[BUILD_APP_PROMPT], ttl_ms=0, cache_scope="private")


async def get_prompt(
    ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    if params.name != BUILD_APP:
        raise MCPError(
            code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name[:100]!r}. Available: {BUILD_APP}."
        )
    idea = (params.arguments or {}).get("idea")
    return types.GetPromptResult(
        description=BUILD_APP_PROMPT.description,
        messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=build_app_text(idea)))],
    )
