"""Django's HTTPS settings from the environment (issue 22): on for an https CHARMING_PUBLIC_URL, off for http, each
settable on its own; `manage.py check --deploy` is clean with the production settings docs/operations.md shows."""

from __future__ import annotations

import json
import re
import secrets

import pytest
from django.test import Client, override_settings

from tests.charming.test_database_settings import ROOT, loaded_with

PRINT_HTTPS = (
    "import json; from charming import settings as s; print(json.dumps({"
    "'redirect': s.SECURE_SSL_REDIRECT, 'proxy': getattr(s, 'SECURE_PROXY_SSL_HEADER', None), "
    "'session': s.SESSION_COOKIE_SECURE, 'csrf': s.CSRF_COOKIE_SECURE, 'hsts': s.SECURE_HSTS_SECONDS, "
    "'subdomains': s.SECURE_HSTS_INCLUDE_SUBDOMAINS, 'preload': s.SECURE_HSTS_PRELOAD}))"
)
CHECK_DEPLOY = (
    "import os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'charming.settings'); "
    "from django.core.management import execute_from_command_line; "
    "execute_from_command_line(['manage.py', 'check', '--deploy', '--fail-level', 'WARNING'])"
)
ON = {
    "redirect": True,
    "proxy": ["HTTP_X_FORWARDED_PROTO", "https"],
    "session": True,
    "csrf": True,
    "hsts": 31536000,
    "subdomains": True,
    "preload": True,
}
OFF = {
    "redirect": False,
    "proxy": None,
    "session": False,
    "csrf": False,
    "hsts": 0,
    "subdomains": False,
    "preload": False,
}
HTTPS_VARIABLES = [
    "DJANGO_SECURE_PROXY_SSL_HEADER",
    "DJANGO_SECURE_SSL_REDIRECT",
    "DJANGO_SESSION_COOKIE_SECURE",
    "DJANGO_CSRF_COOKIE_SECURE",
    "DJANGO_SECURE_HSTS_SECONDS",
    "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "DJANGO_SECURE_HSTS_PRELOAD",
]


def https_settings(**env: str) -> dict:
    # Unset unless given: the test's own environment must not decide the defaults.
    loaded = loaded_with(PRINT_HTTPS, **{**dict.fromkeys(HTTPS_VARIABLES, ""), **env})
    assert loaded.returncode == 0, loaded.stderr
    return json.loads(loaded.stdout)


def documented_production_env() -> dict[str, str]:
    """The `.env for production` block of docs/operations.md, with a real random secret key."""
    text = (ROOT / "docs" / "operations.md").read_text()
    block = re.search(r"```sh\n# \.env for production[^\n]*\n(.*?)```", text, re.S)
    assert block, "docs/operations.md lost its production .env block"
    env = dict(line.split("=", 1) for line in block.group(1).splitlines() if line and not line.startswith("#"))
    assert env["DJANGO_SECRET_KEY"].startswith("<")
    env["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)
    return env


def test_an_http_public_url_keeps_every_https_setting_off_as_make_run_and_the_tests_need():
    assert https_settings(CHARMING_PUBLIC_URL="http://127.0.0.1:8000") == OFF
    assert https_settings() == OFF  # the default public URL is http


def test_an_https_public_url_turns_every_https_setting_on():
    assert https_settings(CHARMING_PUBLIC_URL="https://charming.example.com") == ON
    assert https_settings(CHARMING_PUBLIC_URL="https://charming.example.com", DJANGO_SECURE_SSL_REDIRECT="auto") == ON


def test_each_https_setting_can_be_set_either_way_on_its_own():
    turned_off = https_settings(
        CHARMING_PUBLIC_URL="https://charming.example.com",
        DJANGO_SECURE_PROXY_SSL_HEADER="false",
        DJANGO_SECURE_HSTS_SECONDS="3600",
        DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS="false",
        DJANGO_SECURE_HSTS_PRELOAD="off",
    )
    assert turned_off == {**ON, "proxy": None, "hsts": 3600, "subdomains": False, "preload": False}
    turned_on = https_settings(
        CHARMING_PUBLIC_URL="http://127.0.0.1:8000", DJANGO_SESSION_COOKIE_SECURE="true", DJANGO_CSRF_COOKIE_SECURE="1"
    )
    assert turned_on == {**OFF, "session": True, "csrf": True}


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("DJANGO_SECURE_SSL_REDIRECT", "sometimes", "DJANGO_SECURE_SSL_REDIRECT must be true, false or empty"),
        ("DJANGO_SECURE_HSTS_SECONDS", "a year", "DJANGO_SECURE_HSTS_SECONDS must be a whole number of seconds"),
    ],
)
def test_a_bad_value_stops_the_start_naming_the_variable(variable, value, message):
    loaded = loaded_with(PRINT_HTTPS, CHARMING_PUBLIC_URL="https://charming.example.com", **{variable: value})
    assert loaded.returncode != 0
    assert message in loaded.stderr


def test_check_deploy_is_clean_with_the_documented_production_settings():
    env = documented_production_env()
    assert env["CHARMING_PUBLIC_URL"].startswith("https://")

    checked = loaded_with(CHECK_DEPLOY, **{**dict.fromkeys(HTTPS_VARIABLES, ""), "DJANGO_DEBUG": "false", **env})

    assert checked.returncode == 0, checked.stderr + checked.stdout
    assert "System check identified no issues" in checked.stdout, checked.stdout
    assert "WARNINGS" not in checked.stderr + checked.stdout


def test_check_deploy_still_warns_for_an_http_public_url():
    """The check has teeth: the same settings with an http public URL are what `make run` uses, not production."""
    env = {**documented_production_env(), "CHARMING_PUBLIC_URL": "http://charming.example.com"}

    checked = loaded_with(CHECK_DEPLOY, **{**dict.fromkeys(HTTPS_VARIABLES, ""), **env})

    assert checked.returncode != 0
    for code in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert code in checked.stderr, code


@pytest.mark.django_db
def test_with_the_https_settings_http_is_redirected_and_https_gets_hsts():
    https = {
        "SECURE_SSL_REDIRECT": True,
        "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": True,
    }
    with override_settings(**https):
        plain = Client().get("/accounts/login/")
        proxied = Client().get("/accounts/login/", headers={"X-Forwarded-Proto": "https"})

    assert plain.status_code == 301
    assert plain["Location"] == "https://testserver/accounts/login/"
    assert proxied.status_code == 200
    assert proxied["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"


@pytest.mark.django_db
def test_the_test_suite_itself_runs_with_the_https_settings_off(settings, client):
    assert settings.CHARMING_PUBLIC_URL.startswith("http://")
    assert not settings.SECURE_SSL_REDIRECT and not settings.SESSION_COOKIE_SECURE
    assert client.get("/accounts/login/").status_code == 200
