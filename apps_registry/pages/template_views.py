"""Templates for people: the gallery and a template's page (anyone may look), remix (signed in: your own app from
it), and an owner's page to publish, update or take down their app's template (apps_registry/services/templates.py)."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps_registry.exceptions import AccessDenied, CharmingError, NotFound
from apps_registry.pages.app_views import app_or_404, refusal_page
from apps_registry.services.templates import (
    template_get,
    template_of,
    template_publish,
    template_remix,
    template_unpublish,
    templates_search,
)


@require_GET
def gallery(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "")[:200]
    try:
        page = templates_search(query=query, cursor=request.GET.get("cursor") or None)
    except CharmingError as refused:  # an altered cursor: start again
        messages.error(request, refused.message)
        return redirect("templates")
    return render(request, "templates_gallery/gallery.html", {"page": page, "query": query})


@require_GET
def template_page(request: HttpRequest, template_id: uuid.UUID) -> HttpResponse:
    try:
        view = template_get(template_id=template_id)
    except NotFound:
        raise Http404("No such template is published.") from None
    return render(request, "templates_gallery/template.html", {"view": view, "value": view.as_dict()})


@login_required
@require_POST
def remix_submit(request: HttpRequest, template_id: uuid.UUID) -> HttpResponse:
    try:
        saved = template_remix(actor=request.user, template_id=template_id, name=request.POST.get("name") or None)
    except NotFound:
        raise Http404("No such template is published.") from None
    except CharmingError as refused:  # its tests fail now, a limit of your account, a bad name
        messages.error(request, f"Could not make your app from this template: {refused.message}")
        return redirect("template_page", template_id=template_id)
    messages.success(request, f"Your app '{saved.app.name}' is ready: it starts empty, its records are yours.")
    return redirect("app_page", app_id=saved.app.id)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def app_template_page(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    """The owner publishes the app's definition as a template, updates it, or takes it down (`do=unpublish`)."""
    app, _role = app_or_404(request, app_id)
    error = None
    if request.method == "POST":
        try:
            if request.POST.get("do") == "unpublish":
                template_unpublish(actor=request.user, app_id=app.id)
                messages.success(request, "The template is taken down; apps made from it stay.")
                return redirect("app_template", app_id=app.id)
            view = template_publish(
                actor=request.user,
                app_id=app.id,
                title=request.POST.get("title", ""),
                description=request.POST.get("description", ""),
                starter_prompt=request.POST.get("starter_prompt", ""),
            )
            messages.success(request, f"Published: “{view.template.title}” (version {view.template.version}).")
            return redirect("app_template", app_id=app.id)
        except AccessDenied as refused:
            return refusal_page(request, app, refused)
        except CharmingError as refused:
            error = refused
    try:
        published = template_of(actor=request.user, app_id=app.id)
    except CharmingError as refused:
        return refusal_page(request, app, refused)
    if _role != "owner":
        return refusal_page(
            request,
            app,
            AccessDenied(
                f"Only the owner of app '{app.name}' can publish it as a template.",
                app_id=app.id,
                app_name=app.name,
                role=_role,
                need="own",
            ),
        )
    form = (
        request.POST
        if error
        else {
            "title": published.title if published else app.name,
            "description": published.description if published else app.description,
            "starter_prompt": published.starter_prompt if published else "",
        }
    )
    context = {"app": app, "published": published, "form": form, "error": error}
    return render(request, "apps/template.html", context, status=400 if error else 200)
