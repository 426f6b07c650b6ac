"""export_app over /mcp with the SDK client: a link that downloads the app's bundle, for its caller only."""

from __future__ import annotations

import json

import httpx2
import pytest
from jsonschema import Draft202012Validator

from apps_registry.services.definitions import app_definition_save
from mcp_tools.registry import tool_named
from tests.apps_registry.route_helpers import example
from tests.mcp_tools.conftest import MODES, call_tool_error, call_tool_ok, make_agent

OUTPUT = Draft202012Validator(tool_named("export_app").contract["outputSchema"])


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_gets_a_download_link_for_its_app_and_a_stranger_gets_nothing(live, alice, mode):
    app = app_definition_save(actor=alice.user, definition=example("budget"))

    result = call_tool_ok(live, alice, mode, "export_app", {"app_id": str(app.id)})

    assert list(OUTPUT.iter_errors(result.structured_content)) == []
    value = result.structured_content["value"]
    assert (value["app_id"], value["versions"], value["expires_in_seconds"]) == (str(app.id), 1, 600)
    path = "/bundles/" + value["url"].split("/bundles/", 1)[1]
    download = httpx2.get(live.base_url + path, timeout=20)
    assert download.status_code == 200
    assert json.loads(download.content)["definition"]["name"] == app.name
    refused = call_tool_error(live, make_agent("mallory"), mode, "export_app", {"app_id": str(app.id)})
    assert refused.structured_content["error"]["kind"] == "not_found"
