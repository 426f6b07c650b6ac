"""Portable bundles: an app exported as one streamed file (definition, history, records) imports back equal, whole
or not at all, through the checks of any new app; from the page, REST and a signed link."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps_registry.access import membership_set
from apps_registry.exceptions import InvalidDefinition, InvalidInput, OperationFailed
from apps_registry.models import App, AppVersion, Record, Storage
from apps_registry.pages.bundle_views import download_link
from apps_registry.services.bundles import PAGE, bundle_export, bundle_import
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run
from tests.apps_registry.route_helpers import example, records
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

RECORDS = 10_000


@pytest.fixture
def owner():
    return UserFactory(username="rosa")


def budget_with_history(owner, *, expenses: int):
    definition = example("budget")
    app = app_definition_save(actor=owner, definition=definition)
    for note in ("Groceries and rent.", "Now with categories."):
        definition = {**definition, "description": note}
        app_definition_save(actor=owner, definition=definition, app_id=app.id)
    route_run(actor=owner, app_id=app.id, op="set_budget", params={"limit": 1e9}, kind="mutation")
    storage = Storage.objects.get(app=app)
    Record.objects.bulk_create(
        [
            Record(
                storage=storage,
                collection="expenses",
                record_id=f"e{n:05d}",
                data={"amount": n / 4, "category": f"c{n % 7}", "note": "ü" * (n % 3)},
            )
            for n in range(expenses)
        ],
        batch_size=2000,
    )
    Storage.objects.filter(pk=storage.pk).update(records_held=storage.records_held + expenses)
    app.refresh_from_db()
    return app


def exported(owner, app) -> dict:
    _app, chunks = bundle_export(actor=owner, app_id=app.id)
    return json.loads("".join(chunks))


def versions_of(app):
    return list(AppVersion.objects.filter(app=app).order_by("number").values_list("number", "summary", "definition"))


def test_a_bundle_of_10000_records_imports_back_equal(owner):
    app = budget_with_history(owner, expenses=RECORDS)
    bundle = exported(owner, app)
    sam = UserFactory(username="sam")

    imported = bundle_import(actor=sam, bundle=bundle)

    copy = App.objects.get(pk=imported.app.id)
    assert (copy.owner, copy.name, copy.version, imported.records) == (sam, app.name, app.version, RECORDS + 1)
    assert records(copy) == records(app)
    assert versions_of(copy) == versions_of(app) and len(versions_of(copy)) == 3
    assert Storage.objects.get(app=copy).records_held == RECORDS + 1
    summary = route_run(actor=sam, app_id=copy.id, op="summary", params={}, kind="query").value
    assert summary == route_run(actor=owner, app_id=app.id, op="summary", params={}, kind="query").value


def test_an_export_is_read_a_page_of_records_at_a_time(owner, django_assert_max_num_queries):
    app = budget_with_history(owner, expenses=3 * PAGE + 5)
    _app, chunks = bundle_export(actor=owner, app_id=app.id)

    with django_assert_max_num_queries(5):  # a page of versions, the pages of records: not a query per record
        pieces = list(chunks)

    # the head, one piece per version (3), the records' opening, one piece per record (the expenses and the budget),
    # the end
    assert len(pieces) == 1 + 3 + 1 + (3 * PAGE + 5 + 1) + 1


def test_an_export_is_read_a_page_of_versions_at_a_time_and_ends_at_the_version_it_began_with(owner, monkeypatch):
    app = budget_with_history(owner, expenses=0)
    definition = example("budget")
    for n in range(4):  # versions 4 to 7
        app_definition_save(actor=owner, definition={**definition, "description": f"Change {n}."}, app_id=app.id)
    monkeypatch.setattr("apps_registry.services.bundles.VERSION_PAGE", 2)
    whole = exported(owner, app)
    _app, chunks = bundle_export(actor=owner, app_id=app.id)

    opening = next(chunks)
    app_definition_save(actor=owner, definition={**definition, "description": "Saved meanwhile."}, app_id=app.id)
    with CaptureQueriesContext(connection) as read:
        streamed = json.loads(opening + "".join(chunks))

    version_pages = [q["sql"] for q in read.captured_queries if AppVersion._meta.db_table in q["sql"]]
    assert len(version_pages) == 4 and all("LIMIT 2" in sql for sql in version_pages)  # 7 versions, 2 a page
    assert len(read.captured_queries) == 5  # and the records' one page

    assert [v["number"] for v in whole["versions"]] == [1, 2, 3, 4, 5, 6, 7]
    assert streamed["versions"] == whole["versions"]  # version 8, saved while it streamed, is not in it
    assert streamed["definition"]["description"] == "Change 3." == whole["versions"][-1]["definition"]["description"]


@pytest.mark.parametrize(
    ("change", "error", "says"),
    [
        (lambda b: b.update(format="zip"), InvalidInput, "This is not a Charming bundle"),
        (
            lambda b: b["records"].append({"collection": "secrets", "id": "x", "data": {}}),
            InvalidInput,
            "'secrets' is not a collection the definition declares",
        ),
        (lambda b: b["records"].append(dict(b["records"][0])), InvalidInput, "appears twice in collection"),
        (
            lambda b: b["records"].append({"collection": "expenses", "id": "big", "data": {"s": "x" * 70000}}),
            OperationFailed,
            "the limit is 65536",
        ),
        (lambda b: b["versions"].reverse(), InvalidInput, "must be greater than the one before"),
        (lambda b: b["versions"][0].update(number=2**40), InvalidInput, "from 1 to 1000000"),
        (
            lambda b: b["records"].append({"collection": ["expenses"], "id": "x", "data": {}}),
            InvalidInput,
            "is not a collection the definition declares",
        ),
        (
            lambda b: b["records"].append({"collection": "expenses", "id": "nul\u0000", "data": {}}),
            InvalidInput,
            "without NUL characters",
        ),
        (
            lambda b: b["versions"][-1]["definition"]["routes"]["summary"].update(kind="sideways"),
            InvalidDefinition,
            "problem",
        ),
    ],
)
def test_a_bad_bundle_is_refused_whole(owner, change, error, says):
    app = budget_with_history(owner, expenses=20)
    bundle = exported(owner, app)
    change(bundle)
    apps_before = App.objects.count()

    with pytest.raises(error) as refused:
        bundle_import(actor=owner, bundle=bundle)

    assert says in refused.value.message
    assert App.objects.count() == apps_before


def test_a_bundle_over_the_records_limit_is_refused(owner, settings):
    settings.CHARMING_ROUTES_MAX_RECORDS_PER_APP = 10
    app = budget_with_history(owner, expenses=5)
    bundle = exported(owner, app)
    bundle["records"] += [{"collection": "expenses", "id": f"x{n}", "data": {}} for n in range(10)]

    with pytest.raises(OperationFailed) as refused:
        bundle_import(actor=owner, bundle=bundle)

    assert "CHARMING_ROUTES_MAX_RECORDS_PER_APP" in refused.value.message


def test_the_page_downloads_a_bundle_and_the_home_page_imports_it(client, owner):
    app = budget_with_history(owner, expenses=30)
    client.force_login(owner)

    download = client.get(reverse("app_bundle", args=[app.id]))

    assert download.status_code == 200 and download.streaming
    assert ".charming.json" in download["Content-Disposition"]
    body = b"".join(download.streaming_content)
    upload = SimpleUploadedFile("budget.charming.json", body, content_type="application/json")
    made = client.post(reverse("app_import"), {"bundle": upload, "name": "Restored"}, follow=True)
    assert "Imported &#x27;Restored&#x27;: 31 records, 3 versions." in made.content.decode()
    assert records(App.objects.get(name="Restored")) == records(app)


def test_a_viewer_cannot_download_and_a_stranger_does_not_find_it(client, owner):
    app = budget_with_history(owner, expenses=3)
    viewer = UserFactory(username="vi")
    membership_set(actor=owner, app=app, user=viewer, role="viewer")
    client.force_login(viewer)
    assert client.get(reverse("app_bundle", args=[app.id])).status_code == 403
    client.force_login(UserFactory(username="mallory"))
    assert client.get(reverse("app_bundle", args=[app.id])).status_code == 404


def test_a_file_that_is_not_a_bundle_says_so(client, owner):
    client.force_login(owner)
    upload = SimpleUploadedFile("x.json", b"not json", content_type="application/json")

    answer = client.post(reverse("app_import"), {"bundle": upload}, follow=True)

    assert "That is not a Charming bundle: it is not JSON" in answer.content.decode() and not App.objects.exists()


def test_a_signed_link_downloads_without_a_session_and_an_altered_one_does_not(client, owner):
    app = budget_with_history(owner, expenses=3)
    link = download_link(user_id=owner.pk, app_id=app.id)

    answer = client.get(link)
    assert answer.status_code == 200 and json.loads(b"".join(answer.streaming_content))["app"]["id"] == str(app.id)
    assert client.get(link[:-5] + "xxxx/").status_code == 404
    stranger_link = download_link(user_id=UserFactory(username="mallory").pk, app_id=app.id)
    assert client.get(stranger_link).status_code == 404


def test_rest_exports_and_imports_a_bundle(api, user, settings):
    app = budget_with_history(user, expenses=12)

    download = api.get(f"/api/apps/{app.id}/bundle/")
    assert download.status_code == 200
    body = b"".join(download.streaming_content)
    made = api.generic("POST", "/api/apps/bundles/?name=Copy", body, content_type="application/json")
    assert made.status_code == 201, made.content
    value = made.json()["value"]
    assert (value["name"], value["records"], value["versions"]) == ("Copy", 13, 3)
    garbage = api.generic("POST", "/api/apps/bundles/", b"[1", content_type="application/json")
    assert garbage.status_code == 400 and "not a Charming bundle" in garbage.json()["error"]["message"]
    settings.CHARMING_BUNDLE_IMPORT_BYTES = 100
    too_big = api.generic("POST", "/api/apps/bundles/", body, content_type="application/json")
    assert too_big.status_code == 413 and "CHARMING_BUNDLE_IMPORT_BYTES" in too_big.json()["error"]["message"]
    assert App.objects.count() == 2


def test_crafted_fields_are_refused_or_ignored_never_a_server_error(owner):
    app = budget_with_history(owner, expenses=2)
    bundle = exported(owner, app)
    bundle["app"] = "not an object"
    bundle["versions"][0]["restored_from"] = -1
    bundle["versions"][1]["changes"] = ["not", "an", "object"]
    bundle["versions"][1]["restored_from"] = [1]

    imported = bundle_import(actor=owner, bundle=bundle)

    rows = AppVersion.objects.filter(app=imported.app).order_by("number")
    assert [r.restored_from for r in rows] == [None, None, None] and rows[1].changes == {}


def test_the_current_version_is_checked_and_tested_like_any_new_app(owner):
    app = budget_with_history(owner, expenses=1)
    bundle = exported(owner, app)
    collections = bundle["versions"][-1]["definition"]["collections"]
    bundle["versions"][-1]["definition"] = {
        "name": "unchecked",
        "collections": collections,
        "routes": {"r": {"kind": "x"}},
    }

    with pytest.raises(InvalidDefinition):
        bundle_import(actor=owner, bundle=bundle)

    imported = bundle_import(actor=owner, bundle=exported(owner, app))
    current = AppVersion.objects.get(app=imported.app, number=imported.app.version)
    assert current.author == owner
    earlier = AppVersion.objects.filter(app=imported.app).exclude(pk=current.pk)
    assert all(v.author_repr.endswith("(imported)") for v in earlier)


@pytest.mark.parametrize("raw", [b'{"format": "charming-bundle", "n": NaN}', b'{"n": 1e400}', b"\xff"])
def test_a_file_with_numbers_json_cannot_hold_is_not_a_bundle(raw):
    from apps_registry.services.bundles import bundle_parse

    with pytest.raises(InvalidInput, match="not a Charming bundle"):
        bundle_parse(raw)
