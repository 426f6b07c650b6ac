"""ASGI entry point: the Django application (admin, REST API)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
application = get_asgi_application()
