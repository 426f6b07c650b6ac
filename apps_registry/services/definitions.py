"""App definitions (the author format v1): save (create or replace) whole or not at all, export,
clear. Saving recomputes the app's authoring advisories."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from apps_registry.access import app_for
from apps_registry.exceptions import InvalidDefinition
from apps_registry.models import Advisory, App, Route
from apps_registry.routes import cache
from apps_registry.routes.advisories import AUTHORING_KINDS, DOC_URL, authoring_advisories
from apps_registry.routes.compiler import DefinitionParts, check_definition
from apps_registry.routes.limits import current_limits
from apps_registry.services.apps import app_create


def definition_check(*, definition: Any) -> DefinitionParts:
    """The checked parts of a definition, or InvalidDefinition listing every problem with its path."""
    parts, problems = check_definition(definition, current_limits())
    if problems or parts is None:
        first = "; ".join(f"{p.path}: {p.message}" for p in problems[:3])
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise InvalidDefinition(
            f"The app definition has {len(problems)} problem(s); nothing was saved. {first}{more}",
            errors=[p.as_dict() for p in problems],
        )
    return parts


def app_definition_save(*, actor: Any, definition: Any, app_id: uuid.UUID | str | None = None) -> App:
    """Create an app from a definition, or replace the definition of an app the actor may author.

    A definition that does not validate is refused whole (InvalidDefinition); nothing is saved.
    Only routes whose content changed get a new version, so only they are recompiled.
    """
    parts = definition_check(definition=definition)
    with transaction.atomic():
        app = _app_for_save(actor=actor, app_id=app_id, parts=parts)
        changed = _sync_routes(app=app, parts=parts)
        Advisory.objects.filter(app=app, kind__in=AUTHORING_KINDS).delete()
        Advisory.objects.bulk_create(
            Advisory(
                app=app,
                kind=draft.kind,
                severity=draft.severity,
                summary=draft.summary,
                user_summary=draft.user_summary,
                data=draft.data,
                doc_url=DOC_URL,
            )
            for draft in authoring_advisories(parts, current_limits())
        )
    cache.forget(changed)
    return app


def _app_for_save(*, actor: Any, app_id: uuid.UUID | str | None, parts: DefinitionParts) -> App:
    if app_id is not None:
        try:
            app_uuid = uuid.UUID(str(app_id))
        except ValueError:
            raise InvalidDefinition(
                f"app_id {app_id!r} is not a UUID.", errors=[{"path": "app_id", "message": "must be a UUID"}]
            ) from None
        # An unused id creates the app; an id in use needs the right to author that app.
        if App.objects.filter(pk=app_uuid).exists():
            app, _role = app_for(actor=actor, app_id=app_uuid, need="author", for_update=True)
            app.name, app.description, app.collections = parts.name, parts.description, parts.collections
            app.save(update_fields=["name", "description", "collections", "updated_at"])
            return app
        app_id = app_uuid
    app = app_create(owner=actor, name=parts.name, description=parts.description, app_id=app_id)
    app.collections = parts.collections
    app.save(update_fields=["collections"])
    return app


def _sync_routes(*, app: App, parts: DefinitionParts) -> list[int]:
    """Make the app's routes match `parts`; returns the ids of routes that changed or went away."""
    existing = {route.name: route for route in Route.objects.select_for_update().filter(app=app)}
    changed = []
    for name, route_parts in parts.routes.items():
        fields = {
            "kind": route_parts.kind,
            "description": route_parts.description,
            "input_schema": route_parts.input_schema,
            "output_schema": route_parts.output_schema,
            "definition": route_parts.body,
            "hints": route_parts.hints,
        }
        route = existing.pop(name, None)
        if route is None:
            Route.objects.create(app=app, name=name, **fields)
            continue
        if any(getattr(route, key) != value for key, value in fields.items()):
            for key, value in fields.items():
                setattr(route, key, value)
            route.version += 1
            route.save()
            changed.append(route.pk)
    for route in existing.values():
        changed.append(route.pk)
        route.delete()
    return changed


def app_definition_export(*, actor: Any, app_id: uuid.UUID | str) -> dict[str, Any]:
    """The app's definition as stored (for those who may author it): the same document `app_definition_save` accepts."""
    app, _role = app_for(actor=actor, app_id=app_id, need="author")
    routes: dict[str, Any] = {}
    for route in Route.objects.filter(app=app).order_by("name"):
        exported: dict[str, Any] = {"kind": route.kind}
        if route.description:
            exported["description"] = route.description
        exported["input"] = route.input_schema
        if route.output_schema is not None:
            exported["output"] = route.output_schema
        exported.update(route.hints)
        exported.update(route.definition)
        routes[route.name] = exported
    return {
        "format": 1,
        "name": app.name,
        "description": app.description,
        "collections": app.collections,
        "routes": routes,
    }


@transaction.atomic
def app_definition_clear(*, actor: Any, app_id: uuid.UUID | str) -> App:
    """Remove an app's routes and declared collections (for those who may author it). The app and its records stay:
    deleting an app is app_delete's job, with its confirmation and audit trail."""
    app, _role = app_for(actor=actor, app_id=app_id, need="author", for_update=True)
    route_ids = list(Route.objects.filter(app=app).values_list("pk", flat=True))
    Route.objects.filter(app=app).delete()
    Advisory.objects.filter(app=app, kind__in=AUTHORING_KINDS).delete()
    app.collections = {}
    app.save(update_fields=["collections", "updated_at"])
    transaction.on_commit(lambda: cache.forget(route_ids))
    return app
