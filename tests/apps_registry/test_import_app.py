"""manage.py import_app: create or update an app from a file; refuse a bad one whole."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from apps_registry.models import App, Route
from tests.apps_registry.route_helpers import EXAMPLES, example

pytestmark = pytest.mark.django_db


def import_app(*args: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("import_app", *args, stdout=out)
    return out.getvalue().strip()


def test_import_app_creates_the_app_and_prints_its_id(user):
    app_id = import_app(str(EXAMPLES / "budget.json"), "--owner", "alice")
    app = App.objects.get(pk=app_id)
    assert app.owner == user and app.name == "Budget"
    assert Route.objects.filter(app=app).count() == len(example("budget")["routes"])


def test_import_app_with_app_id_updates_the_same_app(user, tmp_path):
    app_id = import_app(str(EXAMPLES / "todo.json"), "--owner", "alice")
    changed = example("todo")
    changed["name"] = "Chores"
    path = tmp_path / "todo.json"
    path.write_text(json.dumps(changed))
    assert import_app(str(path), "--owner", "alice", "--app-id", app_id) == app_id
    assert App.objects.get(pk=app_id).name == "Chores"
    assert App.objects.count() == 1


def test_import_app_lists_every_problem_and_saves_nothing(user, tmp_path, capsys):
    broken = example("budget")
    broken["routes"]["add_expense"]["steps"][3]["insert"]["value"] = "{'amount': params.amount +* 2}"
    broken["routes"]["summary"]["kind"] = "report"
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(CommandError) as exc:
        call_command("import_app", str(path), "--owner", "alice")
    assert str(exc.value) == f"'{path}' has 2 problem(s), listed above; nothing was saved."
    err = capsys.readouterr().err
    assert "routes.add_expense.steps[3].insert.value: syntax error at column 27: extraneous input '*'" in err
    assert "routes.summary.kind: must be 'query' or 'mutation', got 'report'" in err
    assert not App.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.json", "--owner", "alice"], "No such file: 'missing.json'."),
        ([str(EXAMPLES / "budget.json"), "--owner", "nobody"], "No user named 'nobody'."),
        ([str(EXAMPLES / "budget.json"), "--owner", "alice", "--app-id", "x1"], "--app-id 'x1' is not a UUID."),
    ],
)
def test_import_app_explains_bad_arguments(user, args, message):
    with pytest.raises(CommandError) as exc:
        call_command("import_app", *args)
    assert str(exc.value).startswith(message)


def test_import_app_reports_invalid_json_with_its_position(user, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"name": "x",\n  oops}')
    with pytest.raises(CommandError) as exc:
        call_command("import_app", str(path), "--owner", "alice")
    assert str(exc.value).startswith(f"'{path}' is not valid JSON:")
    assert "line 2, column 3" in str(exc.value)


def test_import_app_refuses_a_second_app_of_the_same_name_unless_new(user):
    first = import_app(str(EXAMPLES / "todo.json"), "--owner", "alice")
    with pytest.raises(CommandError) as exc:
        call_command("import_app", str(EXAMPLES / "todo.json"), "--owner", "alice")
    assert str(exc.value) == (
        f"'alice' already has an app named 'To-do' ({first}). Pass --app-id {first} to replace its definition, "
        "or --new to create another app with the same name."
    )
    assert App.objects.count() == 1
    second = import_app(str(EXAMPLES / "todo.json"), "--owner", "alice", "--new")
    assert second != first and App.objects.count() == 2


def test_import_app_prints_the_advisories(user, tmp_path, capsys):
    definition = example("todo")
    del definition["routes"]["progress"]["output"]
    path = tmp_path / "todo.json"
    path.write_text(json.dumps(definition))
    import_app(str(path), "--owner", "alice")
    err = capsys.readouterr().err
    assert "advisory [warn] missing-output-schema: Route 'progress' has no 'output' schema" in err


def test_import_app_refuses_a_definition_whose_tests_fail(user, tmp_path, capsys):
    definition = example("todo")
    definition["tests"][0]["expect"] = {"value": {"priority": 3}}
    path = tmp_path / "todo.json"
    path.write_text(json.dumps(definition))
    with pytest.raises(CommandError) as exc:
        call_command("import_app", str(path), "--owner", "alice")
    assert str(exc.value) == (
        f"1 test(s) of '{path}' fail, listed above; nothing was saved (--allow-failing-tests saves anyway)."
    )
    assert 'tests[0]: expected the value {"priority": 3}, got {' in capsys.readouterr().err
    assert not App.objects.exists()
    import_app(str(path), "--owner", "alice", "--allow-failing-tests")
    assert App.objects.count() == 1
