"""The MCP Apps UI resource `ui://charming/app` (extension io.modelcontextprotocol/ui, SEP-1865): the document a
host puts in its sandboxed iframe when open_app is called. docs/mcp.md, "MCP Apps".

One self-contained HTML document: the site's stylesheet, the vendored ext-apps App bundle and Charming's App
script, all inline (the iframe has no origin to load files from). It asks the host for no network at all
(`_meta.ui.csp` with no domains) and says the same in its own CSP: scripts only by hash, no connections, no
form posts, no frames; everything it shows arrives through the bridge as open_app's result.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from typing import Any

import mcp_types as types
from django.conf import settings

UI_EXTENSION = "io.modelcontextprotocol/ui"
APP_UI_URI = "ui://charming/app"
APP_UI_MIME_TYPE = "text/html;profile=mcp-app"
# What open_app's tool result carries the app's rendered HTML under (in `_meta`, which models do not read).
HTML_META_KEY = "io.charming/html"
# No connectDomains and no resourceDomains: the host lets the document reach no server, Charming included.
APP_UI_META: dict[str, Any] = {"ui": {"csp": {"connectDomains": [], "resourceDomains": []}, "prefersBorder": True}}
EXT_APPS_VERSION = "2.0.4"  # apps_registry/static/charming/ext-apps-app.min.js

_STATIC = ("apps_registry", "static", "charming")


def _static(name: str) -> str:
    return settings.BASE_DIR.joinpath(*_STATIC, name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _inline(text: str, tag: str) -> str:
    # An inline element ends at the first "</tag"; the vendored files hold none, and this keeps it so.
    return text.replace(f"</{tag}", f"<\\/{tag}")


@cache
def app_ui_html() -> str:
    """The document served as ui://charming/app (built once per process from the static files)."""
    style = _inline(_static("site.css") + "\n" + _static("mcp-app.css"), "style")
    sdk = _inline(_static("ext-apps-app.min.js"), "script")
    script = _inline(_static("mcp-app.js"), "script")
    policy = "; ".join(
        [
            "default-src 'none'",
            f"script-src {_sha256(sdk)} {_sha256(script)}",
            f"style-src {_sha256(style)}",
            "img-src data:",
            "connect-src 'none'",
            "form-action 'none'",
            "frame-src 'none'",
            "object-src 'none'",
            "base-uri 'none'",
        ]
    )
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "<title>Charming</title>\n"
        f"<style>{style}</style>\n</head>\n<body>\n"
        '<main id="app" class="inline-main" aria-live="polite"><p class="aside">Opening the app…</p></main>\n'
        f"<script>{sdk}</script>\n<script>{script}</script>\n</body>\n</html>\n"
    )


APP_UI_RESOURCE = types.Resource(
    uri=APP_UI_URI,
    name="charming-app",
    title="Charming app view",
    description=(
        "The interactive view of a Charming app (MCP Apps): hosts that show MCP Apps render it inline when "
        "open_app is called. It holds no data of its own; open_app's result fills it."
    ),
    mime_type=APP_UI_MIME_TYPE,
    _meta=APP_UI_META,
)


def app_ui_contents() -> types.TextResourceContents:
    return types.TextResourceContents(uri=APP_UI_URI, mime_type=APP_UI_MIME_TYPE, text=app_ui_html(), _meta=APP_UI_META)
