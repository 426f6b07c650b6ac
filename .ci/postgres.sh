# Source this file: `pg_start` makes and starts a throw-away PostgreSQL cluster on a free
# port under a temp directory and exports DATABASE_URL; `pg_stop` stops it and removes it.
# Works as root (runs the server as the `postgres` user) and as an ordinary user.

pg_bin() {
  if command -v initdb >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v initdb)")"; return; fi
  local d; d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] || { echo "PostgreSQL server binaries not found; install 'postgresql'" >&2; return 1; }
  echo "$d"
}

pg_as() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_start() {
  local bin port
  bin=$(pg_bin) || return 1
  PG_TMP=$(mktemp -d /tmp/charming-pg.XXXXXX)
  [ "$(id -u)" = 0 ] && chown postgres "$PG_TMP"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  pg_as "$bin/initdb" -D "$PG_TMP/data" -U charming --auth=trust -E UTF8 --no-locale >"$PG_TMP/initdb.log" 2>&1 \
    || { cat "$PG_TMP/initdb.log" >&2; return 1; }
  pg_as "$bin/pg_ctl" -D "$PG_TMP/data" -l "$PG_TMP/server.log" -w \
    -o "-p $port -k $PG_TMP -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null \
    || { cat "$PG_TMP/server.log" >&2; return 1; }
  pg_as "$bin/createdb" -h 127.0.0.1 -p "$port" -U charming charming
  export PG_TMP PG_BIN_DIR="$bin"
  export DATABASE_URL="postgres://charming@127.0.0.1:$port/charming"
  echo "PostgreSQL running at $DATABASE_URL"
}

pg_stop() {
  [ -n "${PG_TMP:-}" ] || return 0
  pg_as "$PG_BIN_DIR/pg_ctl" -D "$PG_TMP/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$PG_TMP"
  unset PG_TMP
}
