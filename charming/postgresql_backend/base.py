"""Django's PostgreSQL backend whose psycopg pool takes its `check` from OPTIONS["pool"]["check"].

Django builds the pool with either no check or `check_connection` on every checkout (CONN_HEALTH_CHECKS), and
refuses a `check` among the pool's options; this backend builds it the same way with settings.py's
IdleConnectionCheck (charming/postgres.py) instead.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base as postgresql
from psycopg_pool import ConnectionPool

# django-stubs do not declare the backend's pool internals this builds on.
PostgresDatabaseWrapper: Any = postgresql.DatabaseWrapper  # type: ignore[attr-defined]


class DatabaseWrapper(PostgresDatabaseWrapper):
    @property
    def pool(self) -> Any:
        options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == NO_DB_ALIAS or not isinstance(options, dict) or "check" not in options:
            return super().pool  # no pool for the connection Django opens to create and drop databases
        if self.alias not in self._connection_pools:
            connect_kwargs = self.get_connection_params()
            connect_kwargs["autocommit"] = True  # as Django's: it sets autocommit itself later on
            pool = ConnectionPool(kwargs=connect_kwargs, open=False, configure=self._configure_connection, **options)
            self._connection_pools.setdefault(self.alias, pool)  # the first thread's wins, as in Django's
        return self._connection_pools[self.alias]
