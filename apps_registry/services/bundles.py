"""Portable bundles: an app as one JSON file — its definition, its version history and all its records — to keep,
move to another account or server, or restore; and a bundle imported as a new app of the importer.

Export is streamed: the records are read a page at a time (keyset, by collection and position), so an app of any
size costs the server one page of memory. Import goes through the same checks as any new app (the definition's
problems, its tests, the owner's limits), then every record is checked (a collection the definition declares, an
id, data within CHARMING_ROUTES_MAX_RECORD_BYTES, no more than CHARMING_ROUTES_MAX_RECORDS_PER_APP) and written in
the same transaction: a bundle is imported whole or not at all. The history comes back with its version numbers,
authors and summaries; records keep their ids, data and order (not their timestamps). An import is not a mutation:
it is not in the change log.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F, QuerySet
from django.utils import timezone

from apps_registry.access import app_for
from apps_registry.exceptions import InvalidInput, OperationFailed, unstorable_text_refuse
from apps_registry.models import App, AppVersion, Record, Storage
from apps_registry.routes.limits import current_limits, limit_details
from apps_registry.routes.store import encoded_record
from apps_registry.services.apps import audit_record
from apps_registry.services.definitions import app_definition_export, definition_save
from apps_registry.values import clip, type_name

BUNDLE_FORMAT = "charming-bundle"
BUNDLE_VERSION = 1
PAGE = 1000  # records read per query while exporting, and written per INSERT while importing
# Definition versions read per query while exporting: each may be as large as a definition may be.
VERSION_PAGE = 20


def bundle_export(*, actor: Any, app_id: Any) -> tuple[App, Iterator[str]]:
    """The app (for its owner and editors: a bundle holds its definition) and its bundle as chunks of JSON text: its
    definition versions and records are read a page at a time as the chunks are, so an app's whole history is
    never in memory at once."""
    app, _role = app_for(actor=actor, app_id=app_id, need="author")
    head = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "exported_at": timezone.now().isoformat(),
        "app": {"id": str(app.id), "name": app.name, "description": app.description, "version": app.version},
        "definition": app_definition_export(actor=actor, app_id=app.id),
    }
    storage_id = Storage.objects.filter(app=app).values_list("pk", flat=True).first()
    return app, _chunks(head, app, storage_id)


@dataclass(frozen=True)
class BundleSize:
    records: int
    versions: int


def bundle_size(*, actor: Any, app_id: Any) -> tuple[App, BundleSize]:
    """What the app's bundle would hold (for its owner and editors), without reading it."""
    app, _role = app_for(actor=actor, app_id=app_id, need="author")
    records = Storage.objects.filter(app=app).values_list("records_held", flat=True).first() or 0
    return app, BundleSize(records=int(records), versions=AppVersion.objects.filter(app=app).count())


def _chunks(head: dict[str, Any], app: App, storage_id: Any) -> Iterator[str]:
    opening = json.dumps(head, ensure_ascii=False)
    yield opening[:-1] + ', "versions": ['
    # The versions up to the one the head's definition is (one saved while the bundle streams is not in it).
    versions = AppVersion.objects.filter(app=app, number__lte=app.version)
    yield from _items(_version_entry(v) for v in _by_pages(versions, "number", VERSION_PAGE))
    yield '\n], "records": ['
    records = Record.objects.filter(storage_id=storage_id).values("pk", "collection", "record_id", "data")
    items = (
        {"collection": r["collection"], "id": r["record_id"], "data": r["data"]} for r in _by_pages(records, "pk", PAGE)
    )
    yield from _items(items)
    yield "\n]}\n"


def _by_pages(rows: QuerySet[Any, Any], key: str, size: int) -> Iterator[Any]:
    """`rows` in `key` order, read `size` at a time, each page after the last one's key (keyset, not OFFSET), so a
    bundle of any length holds one page in memory."""
    after = None
    while True:
        page = list((rows if after is None else rows.filter(**{f"{key}__gt": after})).order_by(key)[:size])
        yield from page
        if len(page) < size:
            return
        last = page[-1]
        after = last[key] if isinstance(last, dict) else getattr(last, key)


def _items(values: Iterator[Any]) -> Iterator[str]:
    """Each value as one chunk of a JSON list's items, one a line."""
    for n, value in enumerate(values):
        yield ("\n" if n == 0 else ",\n") + json.dumps(value, ensure_ascii=False)


def _version_entry(v: AppVersion) -> dict[str, Any]:
    return {
        "number": v.number,
        "author": v.author_repr,
        "created_at": v.created_at.isoformat(),
        "summary": v.summary,
        "changes": v.changes,
        "restored_from": v.restored_from,
        "definition": v.definition,
    }


@dataclass(frozen=True)
class Imported:
    app: App
    records: int
    versions: int


def _refused(path: str, message: str) -> InvalidInput:
    return InvalidInput(
        f"The bundle's {path.removeprefix('$.')} {message}.", errors=[{"path": path, "message": message}]
    )


def bundle_parse(raw: bytes) -> Any:
    """A bundle file's JSON (InvalidInput if it is not JSON, or holds NaN, Infinity or a number too large)."""
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_not_finite, parse_float=_finite)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InvalidInput(
            "That is not a Charming bundle: it is not JSON (export one from an app's page).",
            errors=[{"path": "$", "message": "not JSON"}],
        ) from None


def _not_finite(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"{text} is too large")
    return number


MOST_VERSION = 1_000_000


def bundle_import(*, actor: Any, bundle: Any, name: Any = None) -> Imported:
    """Create the actor's own app from a bundle (its definition, history and records), whole or not at all: the
    definition's tests run first, outside any transaction, then the app, its history and its records are written in
    the save's one transaction."""
    if not isinstance(bundle, dict) or bundle.get("format") != BUNDLE_FORMAT:
        raise InvalidInput(
            'This is not a Charming bundle: expected a JSON object with "format": "charming-bundle" (export one '
            "from an app's page, GET /api/apps/<id>/bundle/ or export_app).",
            errors=[{"path": "$.format", "message": f"must be '{BUNDLE_FORMAT}'"}],
        )
    if bundle.get("version") != BUNDLE_VERSION:
        raise _refused("$.version", f"is {clip(bundle.get('version'), 20)}; this server reads version {BUNDLE_VERSION}")
    unstorable_text_refuse(bundle, path="$", what="The bundle")
    versions = _versions_checked(bundle.get("versions", []))
    # What becomes the current version is what is checked and tested now: the history's last definition, as its
    # author wrote it (so the history reads as it did), or the bundle's export of it when there is no history.
    definition = versions[-1]["definition"] if versions else bundle.get("definition")
    if not isinstance(definition, dict):
        raise _refused("$.definition", f"must be an app definition (an object), got {type_name(definition)}")
    definition = dict(definition)
    if name is not None:
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise _refused("$.name", "must be text of 1 to 200 characters")
        definition["name"] = name.strip()
    origin = bundle.get("app")
    origin_id = str(origin.get("id", ""))[:40] if isinstance(origin, dict) else ""
    records = bundle.get("records", [])
    if not isinstance(records, list):
        raise _refused("$.records", f"must be a list, got {type_name(records)}")
    limits = current_limits()
    if len(records) > limits.records_per_app:
        raise OperationFailed(
            f"The bundle holds {len(records)} records; an app may hold {limits.records_per_app} "
            "(CHARMING_ROUTES_MAX_RECORDS_PER_APP).",
            details=limit_details("records_per_app", limits.records_per_app),
        )
    declared = definition.get("collections")
    collections = {str(key) for key in declared} if isinstance(declared, dict) else set()
    rows = _records_checked(records, collections=collections, max_bytes=limits.record_bytes)

    def fill(app: App) -> None:  # in the save's transaction, after its tests ran outside it
        if versions:
            saved_row = AppVersion.objects.get(app=app)  # the definition this save checked: the current version
            earlier = [
                AppVersion(
                    app=app,
                    number=v["number"],
                    author=None,
                    author_repr=f"{str(v.get('author') or '?')[:150]} (imported)",
                    definition=v["definition"],
                    changes=v["changes"] if isinstance(v.get("changes"), dict) else {},
                    summary=str(v.get("summary") or "")[:10000],
                    restored_from=_restored_from(v.get("restored_from"), versions),
                )
                for v in versions[:-1]
            ]
            last = versions[-1]
            # Renumbered first: the earlier versions take the numbers below it.
            AppVersion.objects.filter(pk=saved_row.pk).update(
                number=last["number"], summary=str(last.get("summary") or saved_row.summary)[:10000]
            )
            AppVersion.objects.bulk_create(earlier)
            App.objects.filter(pk=app.pk).update(version=last["number"])
            app.version = last["number"]
        storage = Storage.objects.select_for_update().get(app=app)
        for start in range(0, len(rows), PAGE):
            Record.objects.bulk_create(
                [
                    Record(storage=storage, collection=collection, record_id=record_id, data=data)
                    for collection, record_id, data in rows[start : start + PAGE]
                ]
            )
        if rows:
            Storage.objects.filter(pk=storage.pk).update(
                records_held=F("records_held") + len(rows), records_changes=F("records_changes") + 1
            )
        audit_record(
            actor=actor,
            action="app.import",
            app_id=app.id,
            details={"records": len(rows), "versions": len(versions), "from_app_id": origin_id},
        )

    saved = definition_save(actor=actor, definition=definition, within=fill)
    return Imported(app=saved.app, records=len(rows), versions=len(versions) or 1)


def _restored_from(value: Any, versions: list[dict[str, Any]]) -> int | None:
    """A version's `restored_from` if it names one of the bundle's own versions; else none."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if value in {v["number"] for v in versions} else None


def _versions_checked(versions: Any) -> list[dict[str, Any]]:
    if not isinstance(versions, list):
        raise _refused("$.versions", f"must be a list, got {type_name(versions)}")
    numbers: list[int] = []
    for i, version in enumerate(versions):
        where = f"$.versions[{i}]"
        if not isinstance(version, dict) or not isinstance(version.get("definition"), dict):
            raise _refused(where, "must be an object with a definition")
        number = version.get("number")
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MOST_VERSION:
            raise _refused(f"{where}.number", f"must be a whole number from 1 to {MOST_VERSION}")
        if numbers and number <= numbers[-1]:
            raise _refused(f"{where}.number", "must be greater than the one before (versions in order)")
        numbers.append(number)
    return versions


def _records_checked(records: list[Any], *, collections: set[str], max_bytes: int) -> list[tuple[str, str, Any]]:
    seen: set[tuple[str, str]] = set()
    rows: list[tuple[str, str, Any]] = []
    for i, record in enumerate(records):
        where = f"$.records[{i}]"
        if not isinstance(record, dict):
            raise _refused(where, f"must be an object with collection, id and data, got {type_name(record)}")
        collection, record_id, data = record.get("collection"), record.get("id"), record.get("data")
        if not isinstance(collection, str) or collection not in collections:
            raise _refused(
                f"{where}.collection", f"'{clip(collection, 60)}' is not a collection the definition declares"
            )
        if not isinstance(record_id, str) or not record_id or len(record_id) > 200:
            raise _refused(f"{where}.id", "must be text of 1 to 200 characters")
        if not isinstance(data, dict):
            raise _refused(f"{where}.data", f"must be an object, got {type_name(data)}")
        if (collection, record_id) in seen:
            raise _refused(f"{where}.id", f"'{clip(record_id, 60)}' appears twice in collection '{collection}'")
        seen.add((collection, record_id))
        encoded_record(collection, record_id, data, max_bytes)  # OperationFailed over the record size limit
        rows.append((collection, record_id, data))
    return rows


def bundle_filename(app: App, *, now: datetime | None = None) -> str:
    """A file name for the app's bundle: its name (letters, digits, dashes) and the date."""
    stem = "".join(c if c.isalnum() else "-" for c in app.name.lower()).strip("-")[:60] or "app"
    return f"{stem}-{(now or timezone.now()):%Y-%m-%d}.charming.json"
