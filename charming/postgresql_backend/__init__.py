"""Django's PostgreSQL backend, its connection pool checking connections with charming.postgres.IdleConnectionCheck."""
