"""WSGI entry point (admin and REST API only; the MCP endpoint needs ASGI)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
application = get_wsgi_application()
