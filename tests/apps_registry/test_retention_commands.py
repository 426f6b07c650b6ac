from __future__ import annotations

import io
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from apps_registry.management.commands import _ops
from apps_registry.models import App, AuditEvent, Record, Storage
from tests.factories import make_app
from tests.retention_helpers import app_with_records, records_by_app, retained

pytestmark = pytest.mark.django_db

BASE_DIR = Path(__file__).resolve().parents[2]


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def run_error(*args: str) -> CommandError:
    with pytest.raises(CommandError) as excinfo:
        call_command(*args, stdout=io.StringIO(), stderr=io.StringIO())
    return excinfo.value


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def answer(monkeypatch):
    """Type an answer at the confirmation prompt; records the questions asked."""
    asked: list[str] = []

    def set_answer(text: str) -> list[str]:
        def fake_input(prompt: str = "") -> str:
            asked.append(prompt)
            return text

        monkeypatch.setattr("builtins.input", fake_input)
        return asked

    return set_answer


# ---- purge_storage ------------------------------------------------------------------------------


def test_purge_storage_removes_only_storage_older_than_the_retention_window(user, settings):
    settings.CHARMING_STORAGE_RETENTION_DAYS = 30
    old = retained(user, name="Old", count=4, days_ago=31)
    young = retained(user, name="Young", count=2, days_ago=29)
    output = run("purge_storage")
    assert f"Purged storage {old.id} of 'Old' (alice): 4 records." in output
    assert "Done: 1 storage purged." in output
    assert not Storage.objects.filter(pk=old.pk).exists()
    assert Storage.objects.filter(pk=young.pk).exists() and Record.objects.filter(storage=young).count() == 2
    assert AuditEvent.objects.filter(action="storage.purge", app_id=old.app_uuid).count() == 1


def test_purge_storage_older_than_overrides_the_window(user):
    retained(user, name="A", days_ago=3)
    retained(user, name="B", days_ago=1)
    run("purge_storage", "--older-than", "2")
    assert list(Storage.objects.filter(detached_at__isnull=False).values_list("app_name", flat=True)) == ["B"]
    run("purge_storage", "--older-than", "0")
    assert not Storage.objects.filter(detached_at__isnull=False).exists()
    assert AuditEvent.objects.filter(action="storage.purge").count() == 2


def test_purge_storage_with_nothing_to_do_says_so(user):
    retained(user, days_ago=1)
    assert "none. Nothing to purge." in run("purge_storage")


def test_dry_run_lists_each_storage_with_its_app_owner_records_size_and_a_total(user, other_user):
    first = retained(user, name="Old budget", count=3, days_ago=40)
    second = retained(other_user, name="Bob's todo", count=2, days_ago=50)
    output = run("purge_storage", "--dry-run")
    lines = output.splitlines()
    line_of = {s.id: next(line for line in lines if str(s.id) in line) for s in (first, second)}
    assert f"app 'Old budget' ({first.app_uuid})" in line_of[first.id]
    assert "owner alice" in line_of[first.id] and "3 records" in line_of[first.id]
    assert "24 B" in line_of[first.id]  # three records of '{"n": 0}'
    assert f"app 'Bob's todo' ({second.app_uuid})" in line_of[second.id] and "owner bob" in line_of[second.id]
    assert "Total: 2 storage, 5 records, 40 B." in output
    assert "Dry run: nothing was deleted." in output
    assert Record.objects.count() == 5 and not AuditEvent.objects.filter(action="storage.purge").exists()


def test_purge_storage_leaves_every_other_apps_records_untouched(user, other_user):
    app_with_records(user, "Live", 7)
    app_with_records(other_user, "Bob live", 3, prefix="b")
    kept = retained(other_user, name="Bob recent", count=2, days_ago=5)
    doomed = retained(user, name="Doomed", count=11, days_ago=45)
    before = records_by_app(exclude_storage=doomed)
    run("purge_storage", "--batch-size", "4")
    assert records_by_app() == before == {"Live": 7, "Bob live": 3, "Bob recent": 2}
    assert Storage.objects.filter(pk=kept.pk).exists()


def test_interrupted_purge_exits_130_and_a_rerun_resumes(user, monkeypatch):
    storage = retained(user, name="Big", count=10, days_ago=40)
    calls = {"n": 0}
    original = _ops.Progress.__call__

    def interrupt_on_second_batch(self, done: int, total: int) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        original(self, done, total)

    monkeypatch.setattr(_ops.Progress, "__call__", interrupt_on_second_batch)
    error = run_error("purge_storage", "--batch-size", "3")
    assert error.returncode == 130
    assert f"Interrupted. Storage {storage.id} is partly purged and kept; re-run the same command" in str(error)
    assert Record.objects.filter(storage=storage).count() == 4
    assert not AuditEvent.objects.filter(action="storage.purge").exists()

    monkeypatch.setattr(_ops.Progress, "__call__", original)
    output = run("purge_storage", "--batch-size", "3")
    assert f"Purged storage {storage.id} of 'Big' (alice): 4 records." in output
    assert not Storage.objects.filter(pk=storage.pk).exists()
    assert AuditEvent.objects.filter(action="storage.purge").count() == 1


def test_purge_storage_prints_plain_progress_lines_without_a_terminal(user, monkeypatch):
    monkeypatch.setattr(_ops, "PROGRESS_LINE_SECONDS", 0)
    retained(user, name="Big", count=5, days_ago=40)
    output = run("purge_storage", "--batch-size", "2")
    assert [line.split(": ", 1)[1] for line in output.splitlines() if "records deleted" in line] == [
        "2/5 records deleted",
        "4/5 records deleted",
        "5/5 records deleted",
    ]


def test_purge_storage_shows_a_progress_bar_on_a_terminal(user):
    retained(user, name="Big", count=5, days_ago=40)
    terminal = FakeTerminal()
    call_command("purge_storage", "--batch-size", "2", stdout=terminal)
    output = terminal.getvalue()
    assert "\r" in output and "100%" in output and "5/5" in output
    assert "records deleted" not in output


def test_purge_storage_by_app_id_purges_young_storage_after_confirmation(user, answer):
    storage = retained(user, name="Mistake", count=3, days_ago=1)
    asked = answer("yes")
    output = run("purge_storage", "--app-id", str(storage.app_uuid))
    assert asked and "Type 'yes' to continue" in asked[0]
    assert f"Retained storage of deleted app {storage.app_uuid}:" in output and "owner alice" in output
    assert not Storage.objects.filter(pk=storage.pk).exists()


def test_purge_storage_by_app_id_declined_deletes_nothing(user, answer):
    storage = retained(user, count=3, days_ago=1)
    answer("no")
    error = run_error("purge_storage", "--app-id", str(storage.app_uuid))
    assert error.returncode == 1 and "Not confirmed: nothing was deleted" in str(error)
    assert Record.objects.filter(storage=storage).count() == 3


def test_purge_storage_by_app_id_with_yes_does_not_ask(user, answer):
    storage = retained(user, days_ago=1)
    asked = answer("no")
    run("purge_storage", "--app-id", str(storage.app_uuid), "--yes")
    assert asked == [] and not Storage.objects.filter(pk=storage.pk).exists()


def test_purge_storage_by_app_id_of_a_live_or_unknown_app_is_refused(user):
    live = make_app(owner=user, name="Live")
    for app_id in (str(live.id), str(uuid.uuid4())):
        error = run_error("purge_storage", "--app-id", app_id, "--yes")
        assert error.returncode == 1 and f"No retained storage for app id '{app_id}'" in str(error)
    assert Storage.objects.filter(app=live).exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--app-id", "nope"], "--app-id must be an app's UUID, got 'nope'."),
        (["--older-than", "-1"], "--older-than must be 0 or more days, got -1."),
        (["--batch-size", "0"], "--batch-size must be a positive number of records, got 0."),
        (["--app-id", str(uuid.UUID(int=1)), "--older-than", "3"], "do not combine it with --older-than"),
    ],
)
def test_purge_storage_usage_errors_exit_2_and_quote_the_value(args, message):
    error = run_error("purge_storage", *args)
    assert error.returncode == 2 and message in str(error)


def test_purge_storage_exit_codes_from_the_command_line(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    bad_id = subprocess.run(
        [sys.executable, "manage.py", "purge_storage", "--app-id", "nope"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad_id.returncode == 2 and "--app-id must be an app's UUID, got 'nope'." in bad_id.stderr
    unknown_option = subprocess.run(
        [sys.executable, "manage.py", "purge_storage", "--frobnicate"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unknown_option.returncode == 2 and "unrecognized arguments: --frobnicate" in unknown_option.stderr


@pytest.mark.parametrize("name", ["purge_storage", "restore_storage", "purge_app"])
def test_command_help_documents_the_exit_codes(name):
    from django.core.management import load_command_class

    text = " ".join(load_command_class("apps_registry", name).create_parser("manage.py", name).format_help().split())
    assert "Exit codes: 0 done" in text and "2 bad usage" in text and "130 interrupted" in text


# ---- restore_storage ----------------------------------------------------------------------------


def test_restore_storage_reattaches_and_reports(user):
    storage = retained(user, name="Old budget", count=3, days_ago=2)
    target = make_app(owner=user, name="Budget")
    output = run("restore_storage", str(storage.id), "--to-app", str(target.id))
    assert f"Restored 3 records of deleted app 'Old budget' ({storage.app_uuid}) into app 'Budget' ({target.id})" in (
        output
    )
    assert "attached as its storage" in output
    assert Storage.objects.get(pk=storage.pk).app == target
    assert AuditEvent.objects.get(action="storage.restore").details["confirmed_via"] == "command"


def test_restore_storage_outside_the_window_is_refused_with_a_clear_message(user, settings):
    settings.CHARMING_STORAGE_RETENTION_DAYS = 30
    storage = retained(user, name="Ancient", days_ago=45)
    target = make_app(owner=user, name="Budget")
    error = run_error("restore_storage", str(storage.id), "--to-app", str(target.id))
    assert error.returncode == 1
    assert "45 days ago, outside the 30-day retention window" in str(error) and "'Ancient'" in str(error)
    assert Storage.objects.get(pk=storage.pk).detached_at is not None


def test_restore_storage_of_an_unknown_storage_names_it(user):
    target = make_app(owner=user)
    missing = uuid.uuid4()
    error = run_error("restore_storage", str(missing), "--to-app", str(target.id))
    assert f"No storage with id {missing} exists" in str(error)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bad-id", "--to-app", str(uuid.UUID(int=1))], "STORAGE_ID must be a UUID, got 'bad-id'."),
        ([str(uuid.UUID(int=1)), "--to-app", "zzz"], "--to-app must be a UUID, got 'zzz'."),
    ],
)
def test_restore_storage_malformed_ids_exit_2(args, message):
    error = run_error("restore_storage", *args)
    assert error.returncode == 2 and message in str(error)


# ---- purge_app ----------------------------------------------------------------------------------


def test_purge_app_asks_then_removes_the_app_and_its_data(user, other_user, answer):
    app = app_with_records(user, "Spam", 6)
    app_with_records(other_user, "Innocent", 2)
    before = records_by_app(exclude_storage=app.storage)
    asked = answer("yes")
    output = run("purge_app", str(app.id), "--batch-size", "4")
    assert f"App 'Spam' ({app.id}) of alice: 6 records, 0 routes, 1 members." in output
    assert asked and "deleted now, for good" in asked[0]
    assert f"Purged app 'Spam' ({app.id}) of alice: 6 records." in output
    assert not App.objects.filter(pk=app.pk).exists() and not Storage.objects.filter(app_uuid=app.id).exists()
    assert records_by_app() == before
    assert {e.action for e in AuditEvent.objects.all()} == {"app.purge", "storage.purge"}
    assert AuditEvent.objects.get(action="app.purge").details["confirmed_via"] == "command"


def test_purge_app_declined_keeps_everything(user, answer):
    app = app_with_records(user, "Keep me", 2)
    answer("")
    error = run_error("purge_app", str(app.id))
    assert "Not confirmed" in str(error)
    assert App.objects.filter(pk=app.pk).exists() and Record.objects.count() == 2
    assert not AuditEvent.objects.exists()


def test_purge_app_with_yes_and_unknown_or_malformed_ids(user, answer):
    app = app_with_records(user, "Spam", 1)
    asked = answer("no")
    run("purge_app", str(app.id), "--yes")
    assert asked == [] and not App.objects.filter(pk=app.pk).exists()
    missing = str(uuid.uuid4())
    error = run_error("purge_app", missing, "--yes")
    assert error.returncode == 1 and f"No app with id '{missing}' exists." in str(error)
    error = run_error("purge_app", "12", "--yes")
    assert error.returncode == 2 and "APP_ID must be an app's UUID, got '12'." in str(error)


def test_interrupted_purge_app_exits_130_and_purge_storage_finishes(user, monkeypatch):
    app = app_with_records(user, "Spam", 6)

    def interrupt(self, done: int, total: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_ops.Progress, "__call__", interrupt)
    error = run_error("purge_app", str(app.id), "--yes", "--batch-size", "2")
    assert error.returncode == 130 and f"purge_storage --app-id {app.id} --yes" in str(error)
    assert not App.objects.filter(pk=app.pk).exists() and Record.objects.count() == 4
    monkeypatch.undo()
    run("purge_storage", "--app-id", str(app.id), "--yes")
    assert Record.objects.count() == 0 and not Storage.objects.exists()


def test_interrupt_before_any_deletion_also_exits_130_without_a_traceback(user, monkeypatch):
    storage = retained(user, days_ago=40)

    def interrupted_listing(storages):
        raise KeyboardInterrupt

    monkeypatch.setattr("apps_registry.management.commands.purge_storage.storage_usage", interrupted_listing)
    error = run_error("purge_storage")
    assert error.returncode == 130 and "Interrupted. Re-run the same command to resume." in str(error)
    assert Record.objects.filter(storage=storage).count() == 5


def test_interrupted_restore_exits_130_and_says_nothing_was_restored(user, monkeypatch):
    storage = retained(user, days_ago=1)
    target = make_app(owner=user)

    def interrupted_restore(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("apps_registry.management.commands.restore_storage.storage_restore", interrupted_restore)
    error = run_error("restore_storage", str(storage.id), "--to-app", str(target.id))
    assert error.returncode == 130 and "nothing was restored" in str(error)


def test_dry_run_for_one_app_lists_it_without_asking_or_deleting(user, answer):
    storage = retained(user, name="Mistake", count=2, days_ago=1)
    asked = answer("yes")
    output = run("purge_storage", "--app-id", str(storage.app_uuid), "--dry-run")
    assert f"storage {storage.id}" in output and "Total: 1 storage, 2 records" in output
    assert "Dry run: nothing was deleted." in output and asked == []
    assert Record.objects.filter(storage=storage).count() == 2


def test_one_failing_storage_does_not_stop_the_others_and_exits_1(user, monkeypatch):
    failing = retained(user, name="Failing", count=2, days_ago=50)
    fine = retained(user, name="Fine", count=3, days_ago=40)
    from apps_registry.exceptions import OperationFailed
    from apps_registry.management.commands import purge_storage as command_module

    real_purge = command_module.retained_storage_purge

    def purge_or_fail(**kwargs):
        if str(kwargs["storage_id"]) == str(failing.id):
            raise OperationFailed(f"Storage {failing.id} is busy.")
        return real_purge(**kwargs)

    monkeypatch.setattr(command_module, "retained_storage_purge", purge_or_fail)
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as excinfo:
        call_command("purge_storage", stdout=out, stderr=err)
    assert excinfo.value.returncode == 1 and "1 of 2 storage could not be purged" in str(excinfo.value)
    assert f"Could not purge storage {failing.id}: Storage {failing.id} is busy." in err.getvalue()
    assert f"Purged storage {fine.id} of 'Fine'" in out.getvalue()
    assert Storage.objects.filter(pk=failing.pk).exists() and not Storage.objects.filter(pk=fine.pk).exists()
