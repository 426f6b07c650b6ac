"""Which clients delete_app prompts: only those that can show a form (a URL-only client cannot)."""

from __future__ import annotations

from types import SimpleNamespace

import mcp_types as types
import pytest

from mcp_tools.tools.delete_app import _can_elicit


def call_from(capabilities: types.ClientCapabilities | None):
    ctx = SimpleNamespace(session=SimpleNamespace(client_capabilities=capabilities))
    return SimpleNamespace(ctx=ctx)


@pytest.mark.parametrize(
    ("elicitation", "can_prompt"),
    [
        (None, False),
        (types.ElicitationCapability(), True),  # declared without modes: form, as before modes existed
        (types.ElicitationCapability(form=types.FormElicitationCapability()), True),
        (
            types.ElicitationCapability(form=types.FormElicitationCapability(), url=types.UrlElicitationCapability()),
            True,
        ),
        (types.ElicitationCapability(url=types.UrlElicitationCapability()), False),
    ],
)
def test_only_clients_that_can_show_a_form_are_prompted(elicitation, can_prompt):
    assert _can_elicit(call_from(types.ClientCapabilities(elicitation=elicitation))) is can_prompt


def test_a_client_without_capabilities_is_not_prompted():
    assert _can_elicit(call_from(None)) is False
