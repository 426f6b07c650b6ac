from __future__ import annotations

from django.urls import path

from apps_registry.api import apps, feedback

app_name = "api"

urlpatterns = [
    path("apps/", apps.AppListView.as_view(), name="app-list"),
    path("apps/<str:app_id>/feedback/", feedback.AppFeedbackView.as_view(), name="app-feedback"),
]
