"""Views of the people's pages: they read through selectors and write through services, never the ORM."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordResetForm
from django.forms import Form
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from apps_registry.exceptions import CharmingError, Forbidden, InvalidInput, NotFound, RateLimited
from apps_registry.oauth.policy import app_mcp_url
from apps_registry.pages.connect import host_advice, host_configs, mcp_url, public_https_problem
from apps_registry.pages.forms import AccountDeleteForm, EmailChangeForm, SignUpForm, TokenCreateForm
from apps_registry.pages.history_views import VIA_WORDS
from apps_registry.selectors import (
    app_activity_for,
    app_listings_for,
    email_status_of,
    invitations_pending_for,
    tokens_of,
)
from apps_registry.services.accounts import account_create, account_delete
from apps_registry.services.email_confirmation import (
    email_change,
    email_confirm,
    email_confirmation_read,
    email_confirmation_send,
)
from apps_registry.services.notices import notices_unread_for
from apps_registry.services.tokens import token_create, token_revoke_own
from apps_registry.services.transfers import transfers_pending_for

# Session key holding a just-created token's secret until the result page shows it (once).
NEW_TOKEN_SESSION_KEY = "charming.new_token"
# Sign-up logs the new account in with the model backend (the password was just set, nothing to throttle).
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
SIGNUP_FIELDS = {"username": "username", "email": "email", "password": "password1"}


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """The signed-in user's apps with their role; a welcome for everyone else."""
    if not request.user.is_authenticated:
        return render(request, "pages/welcome.html")
    return home_page(request)


def home_page(request: HttpRequest, *, invitations_error: str = "", status: int = 200) -> HttpResponse:
    """The signed-in home: the user's apps and the invitations waiting for their answer."""
    listings = app_listings_for(request.user)
    activity = app_activity_for(request.user)
    rows = [(listing, activity.get(listing.id)) for listing in listings]
    unread = notices_unread_for(request.user)
    context = {
        "listings": listings,
        "rows": rows,
        "mcp_url": mcp_url(),
        "invitations": invitations_pending_for(request.user),
        "invitations_error": invitations_error,
        "notices": [{"receipt": r, "through": VIA_WORDS.get(r.notice.via, r.notice.via)} for r in unread.receipts],
        "notices_total": unread.total,
        "transfers": transfers_pending_for(request.user),
    }
    return render(request, "pages/home.html", context, status=status)


@sensitive_post_parameters("password1", "password2")
@never_cache
@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("home")
    form = SignUpForm(request.POST or None)
    status, retry_after = 200, None
    if request.method == "POST" and form.is_valid():
        try:
            user = account_create(
                username=form.cleaned_data["username"],
                email=form.cleaned_data["email"],
                password=form.cleaned_data["password1"],
                address=request.META.get("REMOTE_ADDR"),
            )
        except InvalidInput as error:
            _add_errors(form, error, SIGNUP_FIELDS)
        except RateLimited as error:
            form.add_error(None, error.message)
            status, retry_after = 429, error.retry_after_seconds
        else:
            login(request, user, backend=MODEL_BACKEND)
            messages.success(
                request,
                f"Welcome, {user.get_username()}! Your account is ready. We sent a link to {user.email}: open it and "
                "confirm your address, so you can connect agents and be invited by e-mail.",
            )
            return redirect("home")
    response = render(request, "accounts/signup.html", {"form": form}, status=status)
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def email_status(request: HttpRequest) -> HttpResponse:
    """The person's address: confirmed, or waiting for its link (send it again, or change the address)."""
    user: Any = request.user
    changing = request.method == "POST" and request.POST.get("action") == "change"
    form = EmailChangeForm(request.POST if changing else None)
    status = 200
    if request.method == "POST":
        try:
            if not changing:
                email_confirmation_send(user=user, again=True)
                messages.success(request, f"We sent a new link to {user.email}. It may take a minute to arrive.")
                return redirect("email_status")
            if form.is_valid():
                email_change(user=user, email=form.cleaned_data["email"])
                messages.success(request, f"We sent a link to {user.email}: open it to confirm the address.")
                return redirect("email_status")
            status = 400
        except InvalidInput as error:
            if changing:
                _add_errors(form, error, {"email": "email"})
            else:
                messages.error(request, error.message)
            status = 400
        except CharmingError as error:
            messages.error(request, error.message)
            status = error.http_status
    context = {"email": email_status_of(user), "form": form}
    return render(request, "accounts/email.html", context, status=status)


@never_cache
@require_http_methods(["GET", "POST"])
def email_confirm_view(request: HttpRequest, token: str) -> HttpResponse:
    """The page a confirmation link opens: the address and account it confirms, and a button that confirms it
    (a POST: mail scanners open links, and must not confirm an address for whoever sent it there)."""
    try:
        pending = email_confirmation_read(token=token)
    except InvalidInput as error:
        return render(request, "accounts/email_confirm.html", {"error": error.message}, status=400)
    if request.method == "POST":
        try:
            confirmed = email_confirm(token=token)
        except CharmingError as error:
            return render(request, "accounts/email_confirm.html", {"error": error.message}, status=error.http_status)
        messages.success(request, f"Thank you: {confirmed.email} is confirmed for your account {pending.user}.")
        if request.user.is_authenticated and request.user.pk == confirmed.user.pk:
            return redirect("home")
        return redirect("login")
    return render(request, "accounts/email_confirm.html", {"pending": pending})


@sensitive_post_parameters("password")
@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def account_delete_view(request: HttpRequest) -> HttpResponse:
    form = AccountDeleteForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            result = account_delete(
                actor=request.user,
                password=form.cleaned_data["password"],
                purge_storage=form.cleaned_data["purge_storage"],
            )
        except InvalidInput as error:
            _add_errors(form, error, {"password": "password"})
        except CharmingError as error:
            form.add_error(None, error.message)
        else:
            logout(request)
            messages.success(
                request, f"The account {result.username} and its {len(result.apps)} app(s) were deleted. Goodbye!"
            )
            return redirect("home")
    owned = [listing for listing in app_listings_for(request.user) if listing.role == "owner"]
    return render(
        request,
        "accounts/account_delete.html",
        {"form": form, "owned": owned, "retention_days": settings.CHARMING_STORAGE_RETENTION_DAYS},
    )


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def connect(request: HttpRequest) -> HttpResponse:
    """The MCP URL, host configurations, and the user's personal tokens (create: POST)."""
    form = TokenCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            issued = token_create(
                user=request.user,
                name=form.cleaned_data["name"],
                expires_days=form.cleaned_data["expires_days"],
                scopes=form.cleaned_data["scopes"],
            )
        except Forbidden as error:  # the address is not confirmed yet: the page says how
            form.add_error(None, error.message)
            return _connect_page(request, form=form, status=403)
        # Handed to the next GET, which shows it once: a reload of the result page cannot re-create or re-show it.
        request.session[NEW_TOKEN_SESSION_KEY] = {"id": issued.token.pk, "plaintext": issued.plaintext}
        return redirect("token_created")
    return _connect_page(request, form=form, status=400 if form.is_bound else 200)


@never_cache
@login_required
@require_safe
def token_created(request: HttpRequest) -> HttpResponse:
    """The new token's secret, shown this one time (it is popped from the session)."""
    new = request.session.pop(NEW_TOKEN_SESSION_KEY, None)
    if new is None:
        messages.info(request, "A token's secret is shown only once, right after it is created.")
        return redirect("connect")
    token = tokens_of(request.user).filter(pk=new["id"]).first()
    if token is None:
        return redirect("connect")
    url = mcp_url()
    return render(
        request,
        "pages/token_created.html",
        {
            "token": token,
            "plaintext": new["plaintext"],
            "mcp_url": url,
            "configs": host_configs(url=url, token=new["plaintext"]),
        },
    )


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    try:
        token = token_revoke_own(actor=request.user, token_id=token_id)
    except NotFound as error:
        raise Http404(error.message) from None
    messages.success(request, f"Token “{token.name}” ({token.prefix}…) is revoked; hosts using it are refused now.")
    return redirect("connect")


class PasswordResetView(auth_views.PasswordResetView):
    """Django's reset view, with the mailed link on CHARMING_PUBLIC_URL rather than the request's Host."""

    def form_valid(self, form: Form) -> HttpResponse:
        public = urlsplit(settings.CHARMING_PUBLIC_URL)
        assert isinstance(form, PasswordResetForm)
        form.save(
            domain_override=public.netloc,
            use_https=public.scheme == "https",
            token_generator=self.token_generator,
            from_email=self.from_email,
            email_template_name=self.email_template_name,
            subject_template_name=self.subject_template_name,
            request=self.request,
        )
        return HttpResponseRedirect(self.get_success_url())


def _connect_page(request: HttpRequest, *, form: TokenCreateForm, status: int = 200) -> HttpResponse:
    url = mcp_url()
    context: dict[str, Any] = {
        "mcp_url": url,
        "hosts": host_advice(url=url),
        "public_https_problem": public_https_problem(settings.CHARMING_PUBLIC_URL),
        "configs": host_configs(url=url),
        "form": form,
        "tokens": tokens_of(request.user),
        "email": email_status_of(request.user),
        "app_servers": [{"name": app.name, "url": app_mcp_url(app.id)} for app in app_listings_for(request.user)],
    }
    return render(request, "pages/connect.html", context, status=status)


def _add_errors(form: Any, error: InvalidInput, fields: dict[str, str]) -> None:
    """Put a service's per-field errors on the form's fields (unknown paths on the form itself)."""
    for item in error.errors or [{"path": None, "message": error.message}]:
        form.add_error(fields.get(str(item.get("path"))), item["message"])
