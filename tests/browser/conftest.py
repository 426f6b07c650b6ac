"""Browser tests: Debian's Chromium driven by Playwright against pytest-django's live server.

Skipped (with the reason) when /usr/bin/chromium or the playwright package is missing; a failing
test leaves a full-page screenshot in test-artifacts/.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHARMING_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
STAFF_PASSWORD = "a-long-staff-passphrase-1"


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium), as .ci/run does"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the playwright package is missing: pip install -r requirements-dev.txt"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _missing()
    if reason is None:
        return
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop around; Django would refuse ORM calls made
    # from the test body next to it, although they are all synchronous.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()


@pytest.fixture
def page(browser, live_server, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        name = re.sub(r"[^\w.-]+", "_", request.node.nodeid)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    context.close()


@pytest.fixture
def staff_login(transactional_db, django_user_model):
    """A staff superuser with a real password, as the browser must type it."""
    staff = django_user_model.objects.create_user(
        username="operator", email="operator@example.com", password=STAFF_PASSWORD, is_staff=True, is_superuser=True
    )
    return staff


def log_in(page, username: str, password: str = STAFF_PASSWORD) -> None:
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")


def confirm_email(page, address: str) -> None:
    """Open the confirmation link last mailed to `address` (the tests' mail stays in this process) and press
    Confirm, as its owner would."""
    from django.core import mail

    sent = [message for message in mail.outbox if message.to == [address]]
    assert sent, f"no confirmation mail to {address}"
    link = re.search(r"(/accounts/email/confirm/\S+/)", sent[-1].body)
    assert link, sent[-1].body
    page.goto(link.group(1))
    expect_confirmed = page.locator("#confirm-what")
    assert address in expect_confirmed.inner_text()
    page.click("#confirm")
