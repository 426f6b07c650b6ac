"""The OAuth scopes and what each lets an agent do, in the words the consent page shows.

Deciding what a scope permits belongs to apps_registry/access.py once it exists; until then this module
is the one place that knows the scope names.
"""

from __future__ import annotations

from typing import Any

from oauth2_provider.scopes import BaseScopes

READ = "apps:read"
WRITE = "apps:write"
DELETE = "apps:delete"

SCOPES: dict[str, str] = {
    READ: "See your apps and read the data stored in them",
    WRITE: "Add, change and remove data in your apps, and create or edit apps",
    DELETE: "Delete your apps",
}
ALL_SCOPES: frozenset[str] = frozenset(SCOPES)
# What a client gets when it asks for no scope at all.
DEFAULT_SCOPES: tuple[str, ...] = (READ,)


def scopes_parse(scope: str) -> frozenset[str]:
    """The scopes in a space-separated OAuth `scope` string."""
    return frozenset(scope.split())


class CharmingScopes(BaseScopes):
    """DOT's scopes backend: the fixed set above, for every client."""

    def get_all_scopes(self) -> dict[str, str]:
        return dict(SCOPES)

    def get_available_scopes(self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any) -> list:
        return list(SCOPES)

    def get_default_scopes(self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any) -> list:
        return list(DEFAULT_SCOPES)
