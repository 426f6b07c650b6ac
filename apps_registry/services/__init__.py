"""Writes to the domain: plain, typed functions with keyword-only arguments that raise only
apps_registry.exceptions errors. What a caller may do is decided by apps_registry.access, which the
services call; each service opens the transaction its write needs (a mutation's own transaction is
opened by the route engine it runs, apps_registry.routes)."""
