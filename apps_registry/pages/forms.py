"""Forms of the people's pages. They check shape; the services check the rules."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.forms import UsernameField
from django.core.exceptions import ValidationError

from apps_registry.access import SCOPES, SHAREABLE_ROLES
from apps_registry.models import ApiToken

TOKEN_MAX_EXPIRY_DAYS = 3650


class SignUpForm(forms.Form):
    username = UsernameField(
        max_length=150,
        help_text="Letters, digits and . + - _ only.",
        widget=forms.TextInput(attrs={"autocomplete": "username", "autofocus": True}),
    )
    email = forms.EmailField(
        help_text="We send a link to it: confirm your address to connect agents and be invited by e-mail. Also for "
        "password resets.",
        widget=forms.EmailInput(attrs={"autocomplete": "email"}),
    )
    password1 = forms.CharField(
        label="Password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=" ".join(password_validation.password_validators_help_texts()),
    )
    password2 = forms.CharField(
        label="Password again",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def clean(self) -> dict[str, object]:
        cleaned = super().clean() or {}
        if cleaned.get("password1") and cleaned.get("password2") and cleaned["password1"] != cleaned["password2"]:
            self.add_error("password2", "The two passwords differ.")
        if cleaned.get("password1") and self.errors:
            # account_create decides; this only lists the password's problems beside the other fields' at once.
            user = get_user_model()(username=cleaned.get("username", ""), email=cleaned.get("email", ""))
            try:
                password_validation.validate_password(str(cleaned["password1"]), user=user)
            except ValidationError as error:
                self.add_error("password1", error)
        return cleaned


class EmailChangeForm(forms.Form):
    email = forms.EmailField(
        label="New e-mail address",
        help_text="We send a link to it; your account uses it once you open the link and confirm.",
        widget=forms.EmailInput(attrs={"autocomplete": "email"}),
    )


class AccountDeleteForm(forms.Form):
    password = forms.CharField(
        label="Your password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
    )
    purge_storage = forms.BooleanField(
        required=False,
        label="Also erase my apps' stored records now",
        help_text="Otherwise they are kept for the retention window, then erased.",
    )


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=ApiToken._meta.get_field("name").max_length,  # type: ignore[arg-type]
        help_text="Something to recognise it by, e.g. “laptop – Claude Code”.",
    )
    expires_days = forms.IntegerField(
        label="Expires after (days)",
        required=False,
        min_value=1,
        max_value=TOKEN_MAX_EXPIRY_DAYS,
        help_text="Leave empty for a token that does not expire.",
    )
    scopes = forms.MultipleChoiceField(
        label="It may",
        choices=[(scope, f"{description} ({scope})") for scope, description in SCOPES.items()],
        initial=list(SCOPES),
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one thing the token may do."},
        help_text="Untick what the agent should not do: a token with only the first can read but change nothing.",
    )


class InvitationCreateForm(forms.Form):
    user = forms.CharField(
        label="Username or email",
        max_length=254,
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
        help_text="They must have a Charming account; they accept or decline on their home page.",
    )
    role = forms.ChoiceField(
        choices=[(role, role.capitalize()) for role in SHAREABLE_ROLES],
        initial="viewer",
        help_text="Editors may run the app's actions; viewers only see its data.",
    )
