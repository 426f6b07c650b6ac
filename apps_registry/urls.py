from __future__ import annotations

from django.urls import path

from apps_registry import views

app_name = "api"

urlpatterns = [
    path("apps/", views.AppListView.as_view(), name="app-list"),
]
