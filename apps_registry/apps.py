from __future__ import annotations

from django.apps import AppConfig


class AppsRegistryConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps_registry"
    verbose_name = "Charming apps"
