"""Bundles for people: download an app as one file (its definition, history and records) from its page, and import
one as a new app from the home page (apps_registry/services/bundles.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from apps_registry.exceptions import AccessDenied, CharmingError, NotFound
from apps_registry.models import App
from apps_registry.pages.app_views import app_or_404, refusal_page
from apps_registry.services.bundles import bundle_export, bundle_filename, bundle_import, bundle_parse

DOWNLOAD_SALT = "charming.bundle.download"
DOWNLOAD_SECONDS = 600


def bundle_response(request: HttpRequest, app: App, chunks: Iterator[str]) -> StreamingHttpResponse:
    """The bundle as a download, streamed (under ASGI a page of records at a time, each read on a worker thread)."""
    body = _streamed(chunks) if isinstance(request, ASGIRequest) else (chunk.encode() for chunk in chunks)
    response = StreamingHttpResponse(body, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, bundle_filename(app)) or "attachment"
    response["Cache-Control"] = "no-store"
    return response


async def _streamed(chunks: Iterator[str]) -> AsyncIterator[bytes]:
    def following() -> str | None:
        return next(chunks, None)

    while True:
        chunk = await sync_to_async(following, thread_sensitive=True)()
        if chunk is None:
            return
        yield chunk.encode()


@login_required
@require_GET
def bundle_download(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse | StreamingHttpResponse:
    app, _role = app_or_404(request, app_id)
    try:
        app, chunks = bundle_export(actor=request.user, app_id=app.id)
    except AccessDenied as refused:
        return refusal_page(request, app, refused)
    return bundle_response(request, app, chunks)


def download_link(*, user_id: int, app_id: uuid.UUID) -> str:
    """A signed path that downloads the app's bundle for `user_id` within DOWNLOAD_SECONDS (export_app's URL)."""
    token = signing.dumps({"u": user_id, "a": str(app_id)}, salt=DOWNLOAD_SALT, compress=True)
    return f"/bundles/{token}/"


@require_GET
def bundle_signed_download(request: HttpRequest, token: str) -> StreamingHttpResponse:
    """export_app's link: no session needed, the signature names who may download which app (access checked now)."""
    from django.contrib.auth import get_user_model

    try:
        claim = signing.loads(token, salt=DOWNLOAD_SALT, max_age=DOWNLOAD_SECONDS)
        user = get_user_model().objects.get(pk=claim["u"], is_active=True)
        app, chunks = bundle_export(actor=user, app_id=claim["a"])
    except (signing.BadSignature, KeyError, TypeError, CharmingError, get_user_model().DoesNotExist):
        raise Http404("This download link is not valid: it expired (after 10 minutes) or was altered.") from None
    return bundle_response(request, app, chunks)


@login_required
@require_POST
def bundle_upload(request: HttpRequest) -> HttpResponse:
    """Import a bundle file as a new app of the signed-in person."""
    upload = request.FILES.get("bundle")
    if upload is None:
        messages.error(request, "Choose a bundle file (.charming.json) to import.")
        return redirect("home")
    if upload.size is not None and upload.size > settings.CHARMING_BUNDLE_IMPORT_BYTES:
        messages.error(
            request,
            f"The file is {upload.size} bytes; a bundle may be at most {settings.CHARMING_BUNDLE_IMPORT_BYTES} "
            "(CHARMING_BUNDLE_IMPORT_BYTES).",
        )
        return redirect("home")
    try:
        bundle = bundle_parse(upload.read())
        imported = bundle_import(actor=request.user, bundle=bundle, name=request.POST.get("name") or None)
    except NotFound:
        raise Http404 from None
    except CharmingError as refused:
        messages.error(request, f"Not imported: {refused.message}")
        return redirect("home")
    messages.success(
        request,
        f"Imported '{imported.app.name}': {imported.records} record{'s' if imported.records != 1 else ''}, "
        f"{imported.versions} version{'s' if imported.versions != 1 else ''}.",
    )
    return redirect("app_page", app_id=imported.app.id)
