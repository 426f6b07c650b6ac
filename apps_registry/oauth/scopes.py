"""django-oauth-toolkit's scopes backend. The scopes, their consent-page words and what each permits are
rules of apps_registry/access.py; they are re-exported here for the OAuth code."""

from __future__ import annotations

from typing import Any

from oauth2_provider.scopes import BaseScopes

from apps_registry.access import ALL_SCOPES, DELETE, READ, SCOPES, WRITE

__all__ = ["ALL_SCOPES", "DEFAULT_SCOPES", "DELETE", "READ", "SCOPES", "WRITE", "CharmingScopes", "scopes_parse"]

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
