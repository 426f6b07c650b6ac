"""docs/automation.md's signing examples, in Python and with curl and openssl, run as written against a live server:
each delivers, and a tampered copy of each is refused."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from apps_registry.services.definitions import app_definition_save
from apps_registry.services.hooks import hook_create
from tests.apps_registry.route_helpers import records
from tests.apps_registry.test_hooks import BUDGET

pytestmark = pytest.mark.django_db(transaction=True)

DOC = (Path(__file__).resolve().parents[2] / "docs" / "automation.md").read_text()


def block(language: str) -> str:
    (found,) = re.findall(rf"```{language}\n(.*?)```", DOC.split("\n# Webhooks in\n", 1)[1], flags=re.S)
    return found


@pytest.fixture
def hook(live_server, user):
    app = app_definition_save(actor=user, definition=BUDGET)  # add_expense takes the examples' amount and note
    made = hook_create(actor=user, app_id=app.id, route="add_expense")
    return app, f"{live_server.url}/hooks/{made.view.hook.id}/", made.secret


def test_the_python_example_delivers(hook):
    app, url, secret = hook
    scope = {"URL": url, "SECRET": secret}

    exec(compile(block("python"), "docs/automation.md", "exec"), scope)  # noqa: S102 (our own docs)

    assert [r["amount"] for r in records(app, "expenses").values()] == [12.5]


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("openssl")), reason="needs curl and openssl")
def test_the_curl_example_delivers_and_a_wrong_secret_is_refused(hook):
    app, url, secret = hook

    def run(with_secret: str) -> str:
        env = {**os.environ, "URL": url, "SECRET": with_secret}
        done = subprocess.run(["bash", "-c", block("sh")], env=env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert '"ok":true' in run(secret).replace(" ", "")
    refused = run(secret + "x")
    assert "does not match this body for this webhook's secret" in refused
    assert [r["amount"] for r in records(app, "expenses").values()] == [12.5]
