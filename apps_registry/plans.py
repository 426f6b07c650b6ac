"""Which statements PostgreSQL may plan once: the hot path's lookups by key, declared where their SQL is written.

A statement psycopg prepares is parsed once per connection, and after five executions PostgreSQL may stop planning
it as well, keeping a generic plan (made without the values) when that plan's estimate is no worse than the custom
plans before it. That is right for a lookup by a unique key or an insert of values: one plan, an index probe,
serves every value, and PostgreSQL plans again when the table's statistics change. It is wrong where the best plan
depends on the values: the records table holds apps of every size, and a plan made for an app with ten records, or
while the table was small, keeps scanning the wrong index for an app with a million (docs/performance.md,
"Figures after the third pass").

So a statement is prepared only when the code that writes it has declared it with `plan_stable`; every other
statement (the ORM's, a `find` with its filters) is sent unprepared and planned for its own values each time.
The cursor that reads the declarations is charming/postgres.py's, named in the settings.
"""

from __future__ import annotations

_STABLE: set[str] = set()


def plan_stable(sql: str) -> str:
    """`sql`, declared to have one best plan whatever its values (a lookup by a unique key, an insert of values):
    on PostgreSQL it may be prepared, and keep a generic plan."""
    _STABLE.add(sql)
    return sql


def is_plan_stable(sql: object) -> bool:
    return type(sql) is str and sql in _STABLE
