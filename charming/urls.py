from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "Charming staff console"
admin.site.site_title = "Charming"
admin.site.index_title = "Apps, advisories and feedback"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("apps_registry.api.urls")),
]
