"""Migrations of stored records: `{"<collection>": "<CEL expression over record>"}`, given with a definition
save. Checked like a step's expressions; run over one record at a time, each evaluation a call of its own for
the engine's bounds (CEL work and time, value sizes, record size). The expression's map replaces the
record's data (its id never changes); `null` deletes the record."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apps_registry.exceptions import HandlerError
from apps_registry.routes.budget import CallBudget
from apps_registry.routes.expressions import Expr, compile_expression, to_json
from apps_registry.routes.limits import Limits
from apps_registry.routes.steps import NAME, Call, bad_name
from apps_registry.routes.store import MeteredStore, Store, encoded_record
from apps_registry.routes.types import Problem
from apps_registry.values import clip, type_name

# What a migration's expression may read: the record (its data plus id), the save's time, the app.
MIGRATE_CONTEXT = (("record", "dyn"), ("now", "timestamp"), ("app", "map(string, dyn)"))


@dataclass(frozen=True)
class Migration:
    """A checked migration: its expression per collection."""

    exprs: dict[str, Expr]

    @property
    def collections(self) -> list[str]:
        return sorted(self.exprs)


def check_migration(spec: Any, limits: Limits) -> tuple[Migration | None, list[Problem]]:
    """The compiled migration, or every problem with its path (`migrate.<collection>`)."""
    if not isinstance(spec, dict) or not spec:
        return None, [
            Problem(
                "migrate",
                "must be an object mapping collections to a CEL expression over `record`, such as "
                "{\"books\": \"{'title': record.title, 'tags': []}\"}: a map replaces the record's data, "
                "null deletes the record",
            )
        ]
    problems: list[Problem] = []
    exprs: dict[str, Expr] = {}
    for collection, source in spec.items():
        path = f"migrate.{collection}"
        if not isinstance(collection, str) or not NAME.match(collection):
            problems.append(Problem(path, bad_name("a collection name")))
            continue
        expr, found = compile_expression(source, limits=limits, context=MIGRATE_CONTEXT, route="migrate", where=path)
        problems.extend(Problem(path, p.message, p.limit, p.max) for p in found)
        if expr is not None:
            exprs[collection] = expr
    if problems:
        return None, problems
    return Migration(exprs=exprs), []


def migrated_data(
    expr: Expr, *, record: dict[str, Any], now: datetime, app_id: str, store: Store, limits: Limits
) -> dict[str, Any] | None:
    """A record's new data (its id left out), or None to delete it. A value that is not a map or null, or a
    map over the record size, fails as `handler_error` naming the collection and the record."""
    collection = expr.where.removeprefix("migrate.")
    budget = CallBudget(limits=limits, route="migrate", sizes={})
    budget.bind("record", record, f"{expr.where} (record {record['id']})")
    call = Call(
        route="migrate",
        values={"record": record, "now": now, "app": {"id": app_id}},
        budget=budget,
        store=MeteredStore(store, max_read=0, max_written=0),
    )
    try:
        value = expr.evaluate(call)
    except HandlerError as exc:
        raise HandlerError(
            f"Migrating {collection}/{record['id']}: {exc.message}",
            details={"collection": collection, "id": record["id"]},
        ) from None
    if value is None:
        return None
    budget.check(value, f"{expr.where} (record {record['id']})")
    try:
        data = to_json(value)
    except HandlerError as exc:
        raise HandlerError(
            f"Migrating {collection}/{record['id']}: {exc.message}",
            details={"collection": collection, "id": record["id"]},
        ) from None
    if not isinstance(data, dict):
        raise HandlerError(
            f"Migrating {collection}/{record['id']}: `{clip(expr.source, 200)}` must give a map (the record's new "
            f"data) or null (delete it), got {type_name(data)}.",
            details={"collection": collection, "id": record["id"]},
        )
    data.pop("id", None)  # a record's id never changes
    encoded_record(collection, record["id"], data, limits.record_bytes)
    return data
