"""Templates and remix: an owner publishes an app's definition (never its records) for anyone to start from, and
anyone signed in makes their own app from one, through the same checks, tests and limits as any new app.

A template is a snapshot: publishing copies the app's stored definition as it is then (publishing again updates
it); the app itself stays private. A remix keeps a link to its template (`App.remixed_from`) until the template is
unpublished. Staff can unlist a template (it leaves the gallery and the search; remixes made stay).
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count, Q, QuerySet

from apps_registry.access import app_for
from apps_registry.cursors import cursor_make, cursor_read
from apps_registry.exceptions import InvalidInput, NotFound, unstorable_text_refuse
from apps_registry.models import App, Template
from apps_registry.services.apps import audit_record
from apps_registry.services.definitions import SavedDefinition, app_definition_export, definition_save
from apps_registry.values import clip, parse_uuid

TITLE_CHARS = 100
DESCRIPTION_CHARS = 1000
PROMPT_CHARS = 1000
SEARCH_PAGE = 20
_CURSOR_FORM = "templates-search"


@dataclass(frozen=True)
class TemplateView:
    """A template as the gallery, the tools and the page show it: what it is, its routes, how often it was remixed."""

    template: Template
    remixes: int

    def routes(self) -> list[dict[str, Any]]:
        routes = self.template.definition.get("routes") or {}
        return [
            {"name": name, "kind": route.get("kind", "query"), "description": route.get("description", "")}
            for name, route in sorted(routes.items())
            if isinstance(route, dict)
        ]

    def as_dict(self) -> dict[str, Any]:
        t = self.template
        return {
            "id": str(t.id),
            "title": t.title,
            "description": t.description,
            "starter_prompt": t.starter_prompt,
            "author": t.author_repr,
            "collections": sorted((t.definition.get("collections") or {}).keys()),
            "routes": self.routes(),
            "remixes": self.remixes,
            "published_at": t.published_at.isoformat(),
        }


def _text(value: Any, *, path: str, most: int, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidInput(
            f"{path.removeprefix('$.')} must be text.", errors=[{"path": path, "message": "must be text"}]
        )
    unstorable_text_refuse(value, path=path, what=path.removeprefix("$."))
    text = value.strip()
    if required and not text:
        raise InvalidInput(
            f"{path.removeprefix('$.')} is required: say in a few words what the app is for.",
            errors=[{"path": path, "message": "required"}],
        )
    if len(text) > most:
        raise InvalidInput(
            f"{path.removeprefix('$.')} is {len(text)} characters long; at most {most}.",
            errors=[{"path": path, "message": f"at most {most} characters"}],
        )
    return text


@transaction.atomic
def template_publish(
    *, actor: Any, app_id: Any, title: Any, description: Any = "", starter_prompt: Any = ""
) -> TemplateView:
    """Publish the app's current definition as a template (its owner only), or update the one it has. Its records
    are never part of it."""
    app, _role = app_for(actor=actor, app_id=app_id, need="own", for_update=True)
    fields = {
        "title": _text(title, path="$.title", most=TITLE_CHARS, required=True),
        "description": _text(description, path="$.description", most=DESCRIPTION_CHARS),
        "starter_prompt": _text(starter_prompt, path="$.starter_prompt", most=PROMPT_CHARS),
        "definition": app_definition_export(actor=actor, app_id=app.id),
        "version": app.version,
        "author_repr": actor.get_username(),
    }
    template, created = Template.objects.update_or_create(app=app, defaults=fields)
    audit_record(
        actor=actor,
        action="template.publish",
        app_id=app.id,
        details={"template_id": str(template.id), "version": app.version, "updated": not created},
    )
    return TemplateView(template=template, remixes=template.remixes.count())


@transaction.atomic
def template_unpublish(*, actor: Any, app_id: Any) -> None:
    """Take the app's template down (its owner only); apps remixed from it stay, without the link."""
    app, _role = app_for(actor=actor, app_id=app_id, need="own", for_update=True)
    template = Template.objects.filter(app=app).first()
    if template is None:
        raise NotFound(f"App '{app.name}' has no published template.")
    audit_record(actor=actor, action="template.unpublish", app_id=app.id, details={"template_id": str(template.id)})
    template.delete()


def template_of(*, actor: Any, app_id: Any) -> Template | None:
    """The template the app published, if any (its members may see that it is published)."""
    app, _role = app_for(actor=actor, app_id=app_id, need="read")
    return Template.objects.filter(app=app).first()


def _listed() -> QuerySet[Template]:
    return Template.objects.filter(listed=True).annotate(remix_count=Count("remixes"))


def template_get(*, template_id: Any) -> TemplateView:
    """A listed template, for anyone; NotFound alike for a missing and an unlisted one."""
    pk = parse_uuid(template_id)
    template = None if pk is None else _listed().filter(pk=pk).first()
    if template is None:
        raise NotFound(f"No template with id {clip(template_id)} is published; search_templates lists them.")
    return TemplateView(template=template, remixes=template.remix_count)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class TemplatePage:
    templates: list[TemplateView]
    next_cursor: str | None


def templates_search(*, query: Any = "", cursor: Any = None, limit: int = SEARCH_PAGE) -> TemplatePage:
    """Listed templates whose title, description or starter prompt hold every word of `query`, newest first, a page
    at a time (`cursor` from the previous page)."""
    text = _text(query, path="$.query", most=200)
    rows = _listed()
    for word in text.split()[:10]:
        rows = rows.filter(
            Q(title__icontains=word) | Q(description__icontains=word) | Q(starter_prompt__icontains=word)
        )
    binding = f"{_CURSOR_FORM}:{text.lower()}"
    if cursor is not None:
        if not isinstance(cursor, str):
            raise InvalidInput(
                "cursor must be the next_cursor of a search.",
                errors=[{"path": "$.cursor", "message": "must be a string"}],
            )
        published_at, last_id = cursor_read(cursor, binding=binding, length=2, what="search_templates", path="$.cursor")
        rows = rows.filter(Q(published_at__lt=published_at) | Q(published_at=published_at, id__lt=last_id))
    found = list(rows.order_by("-published_at", "-id")[: limit + 1])
    more = len(found) > limit
    found = found[:limit]
    next_cursor = None
    if more and found:
        last = found[-1]
        next_cursor = cursor_make([last.published_at.isoformat(), str(last.id)], binding=binding)
    return TemplatePage(
        templates=[TemplateView(template=t, remixes=t.remix_count) for t in found],  # type: ignore[attr-defined]
        next_cursor=next_cursor,
    )


def template_remix(*, actor: Any, template_id: Any, name: Any = None) -> SavedDefinition:
    """Create the actor's own app from a listed template's definition (its name, or `name`), through the checks,
    tests and limits of any new app; the app keeps a link to the template."""
    view = template_get(template_id=template_id)
    definition = copy.deepcopy(view.template.definition)
    if name is not None:
        definition["name"] = _text(name, path="$.name", most=200, required=True)
    template = view.template

    def link(app: App) -> None:  # in the save's transaction; its tests ran before it, outside any transaction
        App.objects.filter(pk=app.pk).update(remixed_from=template)
        app.remixed_from = template
        audit_record(
            actor=actor,
            action="template.remix",
            app_id=app.id,
            details={"template_id": str(template.id), "from_app_id": str(template.app_id)},
        )

    saved = definition_save(actor=actor, definition=definition, within=link)
    return saved


@transaction.atomic
def templates_list_set(*, actor: Any, template_ids: list[uuid.UUID], listed: bool) -> int:
    """Staff list or unlist templates (the admin's actions); returns how many changed."""
    changed = Template.objects.filter(pk__in=template_ids).exclude(listed=listed).update(listed=listed)
    for template_id in template_ids:
        audit_record(
            actor=actor,
            action="template.list" if listed else "template.unlist",
            app_id=None,
            details={"template_id": str(template_id)},
        )
    return changed
