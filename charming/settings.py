"""Charming's one settings module. Every value comes from the environment (see .env.example)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DJANGO_DEBUG", default=False)
# The default key only suits a local checkout; production must set DJANGO_SECRET_KEY.
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="insecure-local-only-set-DJANGO_SECRET_KEY-in-production")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "oauth2_provider",
    "apps_registry",
    "mcp_tools",
    # --- Accounts for people (pages, login throttling) ---
    "axes",
    # --- App pages: progressive enhancement (request.htmx) ---
    "django_htmx",
    # --- Background work (staff purges): django-tasks with its database backend, run by db_worker ---
    "django_tasks",
    "django_tasks_db",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # A view's database outage is a 503 with Retry-After (the site's page, or JSON for OAuth and the API).
    "apps_registry.pages.outage.DatabaseUnavailableMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # --- Accounts for people: django-axes last, so it sees every login attempt's outcome ---
    "axes.middleware.AxesMiddleware",
    # --- App pages: the Content-Security-Policy header, and request.htmx ---
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "charming.urls"
WSGI_APPLICATION = "charming.wsgi.application"
ASGI_APPLICATION = "charming.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps_registry.pages.context.email_status",
            ],
        },
    },
]

(BASE_DIR / "var" / "static").mkdir(parents=True, exist_ok=True)
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'var' / 'db.sqlite3'}")}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=0)
# Connections one server process may hold: the psycopg pool's ceiling on PostgreSQL, and on any database the
# number of threads MCP's database work runs on (mcp_tools/database.py). Size it against max_connections
# (docs/operations.md, "Database connections").
DATABASE_POOL_MAX_SIZE = env.int("DATABASE_POOL_MAX_SIZE", default=10)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL and a busy timeout let the ASGI server's threads share the file without "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
    # Tests use a file too, not Django's default shared-cache in-memory database: shared cache locks whole tables
    # and ignores the busy timeout ("database table is locked"), so concurrent tests would see a database
    # unlike the one served.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "var" / "test-db.sqlite3")}
else:
    # PostgreSQL. Server-side binding lets psycopg prepare the statements the code declares plan-stable (lookups by
    # key, apps_registry/plans.py) once a connection has sent one DATABASE_PREPARE_THRESHOLD times: PostgreSQL then
    # parses it once and may keep one plan for it; every other statement is planned for its own values
    # (docs/performance.md). `off` sends every statement as text with its values bound in the client, for a pooler
    # that cannot keep prepared statements (PgBouncer in transaction mode before 1.21, or without
    # max_prepared_statements). At least 1: preparing costs a round trip of its own, which a statement sent once
    # never earns back.
    # Seconds a new connection may take to be established (libpq's connect_timeout; it counts 2 as its least): a
    # server that does not answer at all is then an outage answered in seconds, not after TCP's own minutes.
    DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = env.int("DATABASE_CONNECT_TIMEOUT", default=2)
    prepare_threshold = env.str("DATABASE_PREPARE_THRESHOLD", default="5").strip().lower()
    if prepare_threshold != "off":
        if not prepare_threshold.isdigit() or int(prepare_threshold) < 1:
            raise ImproperlyConfigured(
                "DATABASE_PREPARE_THRESHOLD must be a whole number of uses of at least 1 (a statement is prepared "
                f"once a connection has sent it that many times) or off, got {prepare_threshold[:40]!r}."
            )
        from charming.postgres import PlanStableCursor

        DATABASES["default"].setdefault("OPTIONS", {}).update(
            {
                "server_side_binding": True,
                "prepare_threshold": int(prepare_threshold),
                "cursor_factory": PlanStableCursor,
            }
        )
    if env.bool("DATABASE_POOL", default=True):
        # Django's psycopg pool: a request borrows an open connection for each unit of work and gives it back, so
        # no call pays for a new PostgreSQL connection (SQLite has no pool; opening its file is cheap).
        if DATABASES["default"]["CONN_MAX_AGE"] != 0:
            # Django refuses this only at the first query, on every request; say so at startup instead.
            raise ImproperlyConfigured(
                "DATABASE_CONN_MAX_AGE must be 0 while the connection pool is on (the pool keeps connections open): "
                "unset DATABASE_CONN_MAX_AGE, or set DATABASE_POOL=false to use persistent connections instead."
            )
        from charming.postgres import IdleConnectionCheck

        idle_check_seconds = env.float("DATABASE_HEALTH_CHECK_IDLE_SECONDS", default=5.0)
        if not idle_check_seconds >= 0:
            raise ImproperlyConfigured(
                "DATABASE_HEALTH_CHECK_IDLE_SECONDS must be 0 or more seconds (a pooled connection idle that long is "
                f"checked before use; 0 checks every time), got {idle_check_seconds!r}."
            )
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": env.int("DATABASE_POOL_MIN_SIZE", default=2),
            "max_size": DATABASE_POOL_MAX_SIZE,
            # Seconds a unit of work waits for a free connection before it fails (503 "database unavailable"): while
            # PostgreSQL is down no connection ever comes, so this is how long an outage takes to answer.
            "timeout": env.float("DATABASE_POOL_TIMEOUT", default=1.5),
            # Check a connection as it leaves the pool (an empty query) when it sat idle for this many seconds, or
            # when its socket shows that the server hung up (a PostgreSQL restart): dead connections are replaced
            # instead of failing one call each, and a connection in steady use costs no round trip per unit of
            # work. 0 checks every time. (Django's CONN_HEALTH_CHECKS would pass its own check-every-time.)
            "check": IdleConnectionCheck(idle_check_seconds),
        }
        # Django's backend, building its pool with that check (Django's own would refuse a `check` option).
        DATABASES["default"]["ENGINE"] = "charming.postgresql_backend"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = DEBUG

REST_FRAMEWORK = {
    # OAuth access tokens first: it answers only for bearer tokens that are not personal (chm_) tokens.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps_registry.authentication.OAuthTokenAuthentication",
        "apps_registry.authentication.BearerTokenAuthentication",
    ],
    # Then the token's scopes against each view's declared need (apps_registry/api/permissions.py).
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "apps_registry.api.permissions.TokenScopeRequired",
    ],
    # The token's rate limit, the budget /mcp draws on too (apps_registry/ratelimits.py).
    "DEFAULT_THROTTLE_CLASSES": ["apps_registry.api.throttles.TokenBudgetThrottle"],
    "EXCEPTION_HANDLER": "apps_registry.api.errors.exception_handler",
    # DRF's JSONParser with the body bounded by DATA_UPLOAD_MAX_MEMORY_SIZE (413 beyond it).
    "DEFAULT_PARSER_CLASSES": ["apps_registry.api.parsers.LimitedJSONParser"],
    "UNAUTHENTICATED_USER": None,
}

# Slow work off the request (staff purges): tasks are rows in the database Charming already uses, run by
# `manage.py db_worker` (a process of its own beside the server); no broker to operate.
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Every line any logger prints goes through the redactor (apps_registry/redaction.py), tracebacks included.
    "filters": {"redact": {"()": "apps_registry.redaction.RedactingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # django-axes announces its configuration at every start (and every manage.py command); lockouts still log.
    "loggers": {"axes.apps": {"level": "WARNING"}},
}

# --- Charming ---
# The URL clients use to reach this server; names the resource in OAuth protected-resource metadata.
CHARMING_PUBLIC_URL = env.str("CHARMING_PUBLIC_URL", default="http://127.0.0.1:8000").rstrip("/")

# --- HTTPS (docs/operations.md, "HTTPS"). Each variable left empty (or `auto`) is on when CHARMING_PUBLIC_URL is
# https and off for an http one (`make run`, the tests); true or false sets it either way. ---
_HTTPS = CHARMING_PUBLIC_URL.startswith("https://")


def _https_flag(name: str, value: str) -> bool:
    """An HTTPS variable's value: empty or `auto` follows CHARMING_PUBLIC_URL's scheme, else a boolean."""
    word = value.strip().lower()
    if word in ("", "auto"):
        return _HTTPS
    if word in ("true", "on", "yes", "1"):
        return True
    if word in ("false", "off", "no", "0"):
        return False
    raise ImproperlyConfigured(
        f"{name} must be true, false or empty (auto: on for an https CHARMING_PUBLIC_URL), got {value[:40]!r}."
    )


# Behind a TLS-terminating proxy that sets X-Forwarded-Proto: Django sees those requests as https (the redirect
# below, secure cookies, CSRF on the log-in and consent pages). Only behind a proxy that overwrites that header.
if _https_flag("DJANGO_SECURE_PROXY_SSL_HEADER", env.str("DJANGO_SECURE_PROXY_SSL_HEADER", default="")):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Pages and the REST API answer a plain-http request with a redirect to https (/mcp is not Django's: the proxy
# redirects it).
SECURE_SSL_REDIRECT = _https_flag("DJANGO_SECURE_SSL_REDIRECT", env.str("DJANGO_SECURE_SSL_REDIRECT", default=""))
# Session and CSRF cookies sent over https only.
SESSION_COOKIE_SECURE = _https_flag("DJANGO_SESSION_COOKIE_SECURE", env.str("DJANGO_SESSION_COOKIE_SECURE", default=""))
CSRF_COOKIE_SECURE = _https_flag("DJANGO_CSRF_COOKIE_SECURE", env.str("DJANGO_CSRF_COOKIE_SECURE", default=""))
# Strict-Transport-Security on https responses: browsers then refuse plain http to this host for that many seconds
# and cannot be told otherwise until they pass (start small, e.g. 3600, if unsure). Empty: a year for an https
# CHARMING_PUBLIC_URL, else 0 (no header).
_hsts_seconds = env.str("DJANGO_SECURE_HSTS_SECONDS", default="").strip()
if _hsts_seconds and not _hsts_seconds.isdigit():
    raise ImproperlyConfigured(
        f"DJANGO_SECURE_HSTS_SECONDS must be a whole number of seconds or empty, got {_hsts_seconds[:40]!r}."
    )
SECURE_HSTS_SECONDS = int(_hsts_seconds) if _hsts_seconds else (365 * 24 * 3600 if _HTTPS else 0)
# The header's includeSubDomains and preload flags (a preload list also needs a submission at hstspreload.org).
SECURE_HSTS_INCLUDE_SUBDOMAINS = _https_flag(
    "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", env.str("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default="")
)
SECURE_HSTS_PRELOAD = _https_flag("DJANGO_SECURE_HSTS_PRELOAD", env.str("DJANGO_SECURE_HSTS_PRELOAD", default=""))
# How long storage detached by delete_app (without purge_storage) is kept before purge_storage removes it.
CHARMING_STORAGE_RETENTION_DAYS = env.int("CHARMING_STORAGE_RETENTION_DAYS", default=30)
# Days each mutation's change set (the records before and after: history and undo) is kept; purge_storage deletes
# older ones.
CHARMING_CHANGE_RETENTION_DAYS = env.int("CHARMING_CHANGE_RETENTION_DAYS", default=90)
# Whether mutations record their change sets. Off only to measure what the change log costs (benchmarks/change_log.py):
# without it, nothing can be reverted.
CHARMING_CHANGE_LOG = env.bool("CHARMING_CHANGE_LOG", default=True)
# Hours a mutation's idempotency key (MCP _meta "io.charming/idempotency-key", REST Idempotency-Key) is remembered:
# a retry with the same key within the window gets the first call's result instead of writing again.
CHARMING_IDEMPOTENCY_WINDOW_HOURS = env.int("CHARMING_IDEMPOTENCY_WINDOW_HOURS", default=24)
# The tool result budget: bytes of compact JSON one page of items may fill (list_apps, GET /api/apps/, a route's
# paged find). Past it a page ends at an item boundary with truncated: true and a cursor to continue. The default
# keeps a result well under the ~25k tokens MCP hosts accept from one tool call (docs/mcp.md, "Result size").
CHARMING_TOOL_RESULT_BYTES = env.int("CHARMING_TOOL_RESULT_BYTES", default=60000)

# --- Route engine (apps_registry/routes): bounds on what one app's routes may do; see docs/authoring.md#limits ---
# Each is declared once in apps_registry/routes/limits.py (setting, default, meaning) and read here.
from apps_registry.routes.limits import LIMIT_SETTINGS  # noqa: E402 (kept beside the block it serves)

for _limit in LIMIT_SETTINGS:
    globals()[_limit.setting] = env.int(_limit.setting, default=_limit.default)
del _limit

# --- Rate limits (apps_registry/ratelimits.py; docs/operations.md#rate-limits): per token, per app, failed
# authentications per client address, sign-ups per address and confirmation mails per account, kept in the database
# so every worker shares them. Each limit is a rate per minute or per hour (0 turns it off) and a burst; declared
# once in apps_registry/ratelimits.py and read here. ---
from apps_registry.ratelimits import RATE_LIMIT_SETTINGS  # noqa: E402 (kept beside the block it serves)

for _setting, _default in RATE_LIMIT_SETTINGS:
    globals()[_setting] = env.int(_setting, default=_default)
del _setting, _default
# Requests one server process may take at once from a busy token's budget (never more than a quarter of its burst)
# and then admit without a statement each (services/rate_limits.py _LocalBatches); 1: one statement per request.
CHARMING_RATE_TOKEN_BATCH = env.int("CHARMING_RATE_TOKEN_BATCH", default=8)
CHARMING_RATE_APP_BATCH = env.int("CHARMING_RATE_APP_BATCH", default=8)

# --- Fair shares of the expensive shared work (docs/operations.md, "Fair shares") ---
# CEL worker processes one account's calls may hold at once in one server process (each has at most 2 by default,
# or one per core); one more is refused at once with rate_limited (retry in 1 s). 0: no bound.
CHARMING_CEL_WORKERS_PER_USER = env.int("CHARMING_CEL_WORKERS_PER_USER", default=1)
# Definitions one account may have its author tests running for at once (saves, check_app), across every process;
# one more is refused at once with rate_limited. 0: no bound.
CHARMING_TEST_RUNS_PER_USER = env.int("CHARMING_TEST_RUNS_PER_USER", default=1)
# Record migrations one account's apps may have queued or running as background tasks at once (a save whose
# migration would queue one more is refused at once with rate_limited, nothing saved). 0: no bound.
CHARMING_MIGRATIONS_PER_USER = env.int("CHARMING_MIGRATIONS_PER_USER", default=2)

# --- Schedules (apps_registry/services/schedules.py; run by `manage.py db_worker`) ---
# Schedules one app may have, and all the apps of one owner together.
CHARMING_SCHEDULES_PER_APP = env.int("CHARMING_SCHEDULES_PER_APP", default=10)
CHARMING_SCHEDULES_PER_OWNER = env.int("CHARMING_SCHEDULES_PER_OWNER", default=50)
# The closest two times of one schedule may be, in minutes (a cron expression running more often is refused).
CHARMING_SCHEDULE_MIN_MINUTES = env.int("CHARMING_SCHEDULE_MIN_MINUTES", default=5)
# Consecutive failed runs after which a schedule pauses (and its app's owner gets an e-mail).
CHARMING_SCHEDULE_PAUSE_AFTER = env.int("CHARMING_SCHEDULE_PAUSE_AFTER", default=5)
# Minutes a due time missed while no task worker ran may be late and still run (once); older, it is recorded missed.
CHARMING_SCHEDULE_CATCHUP_MINUTES = env.int("CHARMING_SCHEDULE_CATCHUP_MINUTES", default=60)
# Seconds between a task worker's sweeps for schedules whose task was lost (queued again; a run is never doubled).
CHARMING_SCHEDULE_SWEEP_SECONDS = env.float("CHARMING_SCHEDULE_SWEEP_SECONDS", default=60.0)

# --- Webhooks in (apps_registry/services/hooks.py; POST /hooks/<id>/) ---
# Webhooks one app may have, and all the apps of one owner together.
CHARMING_HOOKS_PER_APP = env.int("CHARMING_HOOKS_PER_APP", default=10)
CHARMING_HOOKS_PER_OWNER = env.int("CHARMING_HOOKS_PER_OWNER", default=50)
# Seconds a delivery's signed timestamp may be from the server's clock, either way (older or newer is refused).
CHARMING_HOOK_TOLERANCE_SECONDS = env.int("CHARMING_HOOK_TOLERANCE_SECONDS", default=300)
# The largest body a delivery may carry, in bytes (413 beyond it, before it is read whole).
CHARMING_HOOK_BODY_BYTES = env.int("CHARMING_HOOK_BODY_BYTES", default=65536)
# Minutes a rotated secret still signs deliveries, unless the rotation says otherwise (keep_old_minutes).
CHARMING_HOOK_ROTATION_OVERLAP_MINUTES = env.int("CHARMING_HOOK_ROTATION_OVERLAP_MINUTES", default=60)

# --- Bundles (apps_registry/services/bundles.py): an app as one file ---
# The largest bundle an import reads, in bytes (the page's upload and POST /api/apps/bundles/).
CHARMING_BUNDLE_IMPORT_BYTES = env.int("CHARMING_BUNDLE_IMPORT_BYTES", default=33554432)

# --- Public apps (apps_registry/services/public_apps.py; /p/<handle>/) ---
# The largest form an anonymous visitor may send to an action of a public app, in bytes of its JSON params.
CHARMING_PUBLIC_PARAMS_BYTES = env.int("CHARMING_PUBLIC_PARAMS_BYTES", default=2048)

# --- Notices (apps_registry/services/notices.py): what notify steps send to an app's members ---
# Notices one app may send in any 24 hours; past it, its notify steps are skipped (its owner is told once).
CHARMING_NOTICES_PER_APP_PER_DAY = env.int("CHARMING_NOTICES_PER_APP_PER_DAY", default=50)

# --- MCP endpoint (/mcp, mcp_tools) ---
# Secret (>= 32 bytes) sealing delete_app's confirmation state (protocol 2026-07-28). Empty: derived from
# DJANGO_SECRET_KEY. Every worker behind one URL must share it.
CHARMING_MCP_STATE_KEY = env.str("CHARMING_MCP_STATE_KEY", default="")
# Seconds a delete_app confirmation prompt stays answerable (2026-07-28: sealed state expiry; 2025-11-25: the
# call waits this long for the user, then fails closed).
CHARMING_MCP_CONFIRM_TTL_SECONDS = env.int("CHARMING_MCP_CONFIRM_TTL_SECONDS", default=300)
# Host headers /mcp answers to (DNS-rebinding protection; "name:*" allows any port). Empty: DJANGO_ALLOWED_HOSTS.
CHARMING_MCP_ALLOWED_HOSTS = env.list("CHARMING_MCP_ALLOWED_HOSTS", default=[])
# Browser Origins /mcp accepts; any other Origin gets 403. Empty: the origin of CHARMING_PUBLIC_URL.
CHARMING_MCP_ALLOWED_ORIGINS = env.list("CHARMING_MCP_ALLOWED_ORIGINS", default=[])
# Seconds an idle 2025-11-25 session (Mcp-Session-Id: no request in flight, no open GET stream) is kept in the
# worker's memory; an abandoned one costs its memory (tens of KB) until then.
CHARMING_MCP_SESSION_IDLE_SECONDS = env.int("CHARMING_MCP_SESSION_IDLE_SECONDS", default=600)
# 2025-11-25 sessions one user may keep open in one worker; one more initialize gets HTTP 429.
CHARMING_MCP_SESSIONS_PER_USER = env.int("CHARMING_MCP_SESSIONS_PER_USER", default=25)
# 2026-07-28 subscriptions/listen streams of the per-app servers (/mcp/apps/<id>): how often each checks its app's
# definition version (seconds), and how many one user may keep open in one worker (one more is refused).
CHARMING_MCP_APP_LISTEN_POLL_SECONDS = env.float("CHARMING_MCP_APP_LISTEN_POLL_SECONDS", default=2.0)
CHARMING_MCP_APP_LISTENS_PER_USER = env.int("CHARMING_MCP_APP_LISTENS_PER_USER", default=4)
# 2025-11-25 sessions one client address (an IPv6 /64) may keep open in one worker, all accounts together; 0: no cap.
CHARMING_MCP_SESSIONS_PER_ADDRESS = env.int("CHARMING_MCP_SESSIONS_PER_ADDRESS", default=250)
# 2025-11-25 sessions one worker keeps at most; at the ceiling the session idle longest is ended for a newcomer.
CHARMING_MCP_SESSIONS_MAX = env.int("CHARMING_MCP_SESSIONS_MAX", default=10_000)

# --- OAuth 2.1 authorization server (django-oauth-toolkit; apps_registry/oauth, docs/operations.md#oauth) ---
# Seconds an access token is valid; clients refresh it with their refresh token.
CHARMING_OAUTH_ACCESS_TOKEN_SECONDS = env.int("CHARMING_OAUTH_ACCESS_TOKEN_SECONDS", default=3600)
# Seconds a refresh token stays usable after its access token expired (rotation gives a new one each refresh).
CHARMING_OAUTH_REFRESH_TOKEN_SECONDS = env.int("CHARMING_OAUTH_REFRESH_TOKEN_SECONDS", default=30 * 24 * 3600)
# Seconds an authorization code may wait before the client exchanges it.
CHARMING_OAUTH_AUTHORIZATION_CODE_SECONDS = env.int("CHARMING_OAUTH_AUTHORIZATION_CODE_SECONDS", default=60)
# Dynamic client registrations accepted per client IP address per hour (429 beyond it).
CHARMING_OAUTH_REGISTRATIONS_PER_HOUR = env.int("CHARMING_OAUTH_REGISTRATIONS_PER_HOUR", default=20)
# Accept https client_id URLs (Client ID Metadata Documents) and fetch their metadata.
CHARMING_OAUTH_CIMD_ENABLED = env.bool("CHARMING_OAUTH_CIMD_ENABLED", default=True)

# http redirect URIs are allowed only on loopback addresses (RFC 8252 native apps), by
# apps_registry/oauth/policy.py, which DOT's deploy check cannot see.
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]
# DOT's own models (named so apps_registry's migrations can point at the swappable Application).
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER = {
    # One issuer, named by the public URL (not by the Host header a proxy passes on).
    "OIDC_ISS_ENDPOINT": CHARMING_PUBLIC_URL,
    "SCOPES_BACKEND_CLASS": "apps_registry.oauth.scopes.CharmingScopes",
    "ACCESS_TOKEN_EXPIRE_SECONDS": CHARMING_OAUTH_ACCESS_TOKEN_SECONDS,
    "REFRESH_TOKEN_EXPIRE_SECONDS": CHARMING_OAUTH_REFRESH_TOKEN_SECONDS,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": CHARMING_OAUTH_AUTHORIZATION_CODE_SECONDS,
    # Authorization code + PKCE (S256 only) for every client; no implicit or password grants.
    "PKCE_REQUIRED": True,
    "OAUTH2_SERVER_CLASS": "apps_registry.oauth.server.S256OnlyServer",
    "OAUTH2_VALIDATOR_CLASS": "apps_registry.oauth.validators.CharmingOAuth2Validator",
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https", "http"],  # http only on loopback: apps_registry/oauth/policy.py
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic", "client_secret_post"],
    # Each refresh rotates the refresh token; presenting a used one again revokes the whole grant.
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
    # RFC 9700 gates, all enforced: no implicit/password grants, no "plain" PKCE, tokens only in the header,
    # RFC 9207 `iss` on authorization responses, tokens stored hashed.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    # RFC 7591 registration, open to anonymous public clients (policy and rate limit in apps_registry/oauth).
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": CHARMING_OAUTH_CIMD_ENABLED,
    "CIMD_METADATA_FETCHER": "apps_registry.oauth.cimd.PolicyMetadataFetcher",
}

# --- Accounts for people (apps_registry/pages: sign-up, log-in, tokens; docs/pages.md) ---
# django-axes checks every authenticate() (the site's and the admin's log-in) before the model backend.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
# Mail for password resets and e-mail confirmations. The console backend prints messages to the server's output
# (offline runs); production sets e.g. django.core.mail.backends.smtp.EmailBackend and the EMAIL_HOST_* values.
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
# Seconds an SMTP connection may take before a mail (a notice, a schedule's pause, a confirmation) gives up.
EMAIL_TIMEOUT = env.int("DJANGO_EMAIL_TIMEOUT", default=10)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="Charming <noreply@localhost>")
# Seconds a password-reset link stays valid.
PASSWORD_RESET_TIMEOUT = env.int("PASSWORD_RESET_TIMEOUT", default=3 * 3600)
# Seconds an e-mail confirmation link stays valid (services/accounts.py; a new one can be sent from the site).
CHARMING_EMAIL_CONFIRMATION_SECONDS = env.int("CHARMING_EMAIL_CONFIRMATION_SECONDS", default=3 * 24 * 3600)
# Brute-force throttling: after AXES_FAILURE_LIMIT failed log-ins for one username from one IP address,
# that pair is locked out for AXES_COOLOFF_MINUTES (a 429 page). Behind a proxy, let uvicorn set the client
# address (--proxy-headers --forwarded-allow-ips) or every client shares the proxy's.
AXES_ENABLED = env.bool("AXES_ENABLED", default=True)
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "accounts/lockout.html"


# --- App pages: Content-Security-Policy (django-csp 4) ---
# Strict on every response: no inline script or style anywhere (the pages, the admin and htmx from
# /static/ all comply), nothing from other origins, no framing, forms post only to this site. Note:
# browsers apply form-action to the redirect after a POST too, so a page whose form redirects to
# another origin (an OAuth consent to a client's redirect URI) must widen it for that view only
# (csp.decorators.csp_update({"form-action": [...]})).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    },
}
