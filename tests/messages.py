"""Fragments of error messages that several test modules assert.

The not-found message for apps ends with a hint naming an MCP tool, which moves out of the domain
layer; tests assert the part before it, which both versions share.
"""

from __future__ import annotations

import re


def app_not_found(app_id: object) -> str:
    """The tool-independent start of the message for an app that does not exist or is not visible."""
    return f"No app with id {app_id} exists or is visible to you"


def app_not_found_match(app_id: object) -> str:
    """`app_not_found` as a `pytest.raises(match=...)` pattern."""
    return re.escape(app_not_found(app_id))
