"""The browser tests' own setup: a clear skip reason instead of an obscure launch failure."""

from __future__ import annotations

from tests.browser import conftest


def test_missing_chromium_gives_a_skip_reason_that_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(conftest, "CHROMIUM", "/nonexistent/chromium")
    assert conftest._missing() == (
        "/nonexistent/chromium is missing: install Debian's chromium (apt-get install -y chromium), as .ci/run does"
    )


def test_present_chromium_and_playwright_need_no_skip(tmp_path, monkeypatch):
    fake = tmp_path / "chromium"
    fake.write_text("")
    monkeypatch.setattr(conftest, "CHROMIUM", str(fake))
    assert conftest._missing() is None
