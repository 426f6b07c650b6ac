#!/usr/bin/env bash
# Checks the multi-worker recipe of docs/operations.md: 8 concurrent MCP 2025-11-25 sessions (5 list_apps
# and one elicited delete_app each) against two uvicorn processes on a throw-away PostgreSQL.
#
#   bash benchmarks/sticky_sessions.sh hash        # nginx, upstream `hash $http_authorization consistent` (the recipe)
#   bash benchmarks/sticky_sessions.sh roundrobin  # nginx, default round-robin (expected to break sessions)
#   bash benchmarks/sticky_sessions.sh workers     # `uvicorn --workers 2` on one port (expected to break sessions)
#
# Needs nginx on PATH for the first two (apt-get install nginx-light). Prints how many sessions completed.
set -uo pipefail
MODE=${1:?usage: sticky_sessions.sh hash|roundrobin|workers}
cd "$(dirname "$0")/.."
source .ci/postgres.sh
pg_start >/dev/null
W=$(mktemp -d /tmp/charming-sticky.XXXXXX)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done; sleep 1; pg_stop; rm -rf "$W"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
P0=$(free_port); P1=$(free_port); P2=$(free_port)
export DATABASE_URL CHARMING_PUBLIC_URL="http://127.0.0.1:$P0" DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost"
export CHARMING_MCP_STATE_KEY="bench-only-shared-state-key-0123456789abcdef"
.venv/bin/python manage.py migrate -v0
.venv/bin/python manage.py shell -c "
from django.contrib.auth import get_user_model
from apps_registry.services.apps import app_create
from apps_registry.services.tokens import token_create
for i in range(8):
    u = get_user_model().objects.create(username=f'u{i}')
    print(token_create(user=u).plaintext, app_create(owner=u, name=f'App {i}').id)
" 2>/dev/null | grep '^chm_' >"$W/tokens"

if [ "$MODE" = workers ]; then
  .venv/bin/uvicorn charming.asgi:application --host 127.0.0.1 --port "$P0" --workers 2 --log-level warning \
    --http charming.serving:NoDelayHttpToolsProtocol \
    >"$W/uvicorn.log" 2>&1 &
  PIDS+=($!)
else
  for p in $P1 $P2; do
    .venv/bin/uvicorn charming.asgi:application --host 127.0.0.1 --port "$p" --log-level warning \
      --http charming.serving:NoDelayHttpToolsProtocol >"$W/uvicorn-$p.log" 2>&1 &
    PIDS+=($!)
  done
  if [ "$MODE" = hash ]; then BALANCE='hash $http_authorization consistent;'; else BALANCE=''; fi
  cat >"$W/nginx.conf" <<NGINX
worker_processes 1;
pid $W/nginx.pid;
error_log $W/nginx-error.log;
events {}
http {
  log_format up "\$request_method \$status \$upstream_addr";
  access_log $W/nginx-access.log up;
  client_body_temp_path $W; proxy_temp_path $W; fastcgi_temp_path $W; uwsgi_temp_path $W; scgi_temp_path $W;
  upstream charming {
    $BALANCE
    server 127.0.0.1:$P1;
    server 127.0.0.1:$P2;
  }
  server {
    listen 127.0.0.1:$P0;
    location / {
      proxy_pass http://charming;
      proxy_http_version 1.1;
      proxy_set_header Host \$host;
      proxy_buffering off;
      proxy_read_timeout 1h;
    }
  }
}
NGINX
  nginx -c "$W/nginx.conf" -g 'daemon off;' &
  PIDS+=($!)
fi
sleep 5
echo "== $MODE"
timeout 120 .venv/bin/python benchmarks/sticky_sessions_client.py "http://127.0.0.1:$P0/mcp" "$W/tokens"
if [ -f "$W/nginx-access.log" ]; then echo "requests per backend:"; awk '{print $NF}' "$W/nginx-access.log" | sort | uniq -c; fi
