"""The route engine: checks an app author's definition, compiles each route once per version
(CEL programs, JSON Schema validators) and runs it against an app's records.

- `compiler.py` checks a definition (every problem, with its path) and compiles a route;
- `steps.py` holds the step kinds, one class each (keys, parsing, running, advisories);
- `runtime.py` runs a compiled route against a `Store` (`store.py`: the seam and the per-call
  accounting; `storage.py`: the SQL store) within a `CallBudget` (`budget.py`);
- `limits.py` declares every bound once; `cache.py` keeps compiled routes per version.

No HTTP or MCP here. `apps_registry.services.routes.route_run` and
`apps_registry.services.definitions.app_definition_save` are its entry points.
"""
