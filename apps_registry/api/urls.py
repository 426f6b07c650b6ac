from __future__ import annotations

from django.urls import path

from apps_registry.api import apps, definitions, feedback, runs

app_name = "api"

urlpatterns = [
    path("apps/", apps.AppListView.as_view(), name="app-list"),
    path("apps/definitions/", definitions.DefinitionCreateView.as_view(), name="definition-create"),
    path("apps/<str:app_id>/definition/", definitions.DefinitionView.as_view(), name="app-definition"),
    path("apps/<str:app_id>/feedback/", feedback.AppFeedbackView.as_view(), name="app-feedback"),
    path("apps/<str:app_id>/run/<str:op>/", runs.RouteRunView.as_view(), name="app-run"),
]
