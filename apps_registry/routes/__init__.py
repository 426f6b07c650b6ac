"""The route engine: checks an app author's definition, compiles each route once per version
(CEL programs, JSON Schema validators) and runs it against an app's records.

Plain Python over the ORM; no HTTP or MCP here. `apps_registry.services.routes.route_run` and
`apps_registry.services.definitions.app_definition_save` are its entry points.
"""
