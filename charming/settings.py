"""Charming's one settings module. Every value comes from the environment (see .env.example)."""

from __future__ import annotations

from pathlib import Path

import environ

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
    "apps_registry",
    "mcp_tools",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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
            ],
        },
    },
]

(BASE_DIR / "var" / "static").mkdir(parents=True, exist_ok=True)
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'var' / 'db.sqlite3'}")}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=0)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL and a busy timeout let the ASGI server's threads share the file without "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )

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
    "DEFAULT_AUTHENTICATION_CLASSES": ["apps_registry.authentication.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "EXCEPTION_HANDLER": "apps_registry.api.errors.exception_handler",
    # DRF's JSONParser with the body bounded by DATA_UPLOAD_MAX_MEMORY_SIZE (413 beyond it).
    "DEFAULT_PARSER_CLASSES": ["apps_registry.api.parsers.LimitedJSONParser"],
    "UNAUTHENTICATED_USER": None,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
}

# --- Charming ---
# The URL clients use to reach this server; names the resource in OAuth protected-resource metadata.
CHARMING_PUBLIC_URL = env.str("CHARMING_PUBLIC_URL", default="http://127.0.0.1:8000").rstrip("/")
# How long storage detached by delete_app (without purge_storage) is kept before purge_storage removes it.
CHARMING_STORAGE_RETENTION_DAYS = env.int("CHARMING_STORAGE_RETENTION_DAYS", default=30)
# Hours a mutation's idempotency key (MCP _meta "io.charming/idempotency-key", REST Idempotency-Key) is remembered:
# a retry with the same key within the window gets the first call's result instead of writing again.
CHARMING_IDEMPOTENCY_WINDOW_HOURS = env.int("CHARMING_IDEMPOTENCY_WINDOW_HOURS", default=24)

# --- Route engine (apps_registry/routes): bounds on what one app's routes may do; see docs/authoring.md#limits ---
# Characters in one CEL expression (checked when an app is saved, and again when a route compiles).
CHARMING_ROUTES_MAX_EXPRESSION_LENGTH = env.int("CHARMING_ROUTES_MAX_EXPRESSION_LENGTH", default=2000)
# How many comprehensions (map/filter/all/exists/exists_one) may be nested inside each other.
CHARMING_ROUTES_MAX_COMPREHENSION_NESTING = env.int("CHARMING_ROUTES_MAX_COMPREHENSION_NESTING", default=2)
# How deeply brackets ( [ { may nest in one expression.
CHARMING_ROUTES_MAX_EXPRESSION_NESTING = env.int("CHARMING_ROUTES_MAX_EXPRESSION_NESTING", default=32)
# Steps in one route.
CHARMING_ROUTES_MAX_STEPS = env.int("CHARMING_ROUTES_MAX_STEPS", default=50)
# Records one call may read (get, find, increment's re-read); aggregates (count, sum) read none.
CHARMING_ROUTES_MAX_RECORDS_READ = env.int("CHARMING_ROUTES_MAX_RECORDS_READ", default=1000)
# Records one call may write (insert, update, upsert, delete, increment).
CHARMING_ROUTES_MAX_RECORDS_WRITTEN = env.int("CHARMING_ROUTES_MAX_RECORDS_WRITTEN", default=100)
# Bytes of one record's JSON data.
CHARMING_ROUTES_MAX_RECORD_BYTES = env.int("CHARMING_ROUTES_MAX_RECORD_BYTES", default=65536)
# Records one app may hold across all its collections.
CHARMING_ROUTES_MAX_RECORDS_PER_APP = env.int("CHARMING_ROUTES_MAX_RECORDS_PER_APP", default=100000)
# Routes in one app definition.
CHARMING_ROUTES_MAX_ROUTES = env.int("CHARMING_ROUTES_MAX_ROUTES", default=100)
# Levels of JSON nesting in a route's input or output schema.
CHARMING_ROUTES_MAX_SCHEMA_NESTING = env.int("CHARMING_ROUTES_MAX_SCHEMA_NESTING", default=64)
# Bytes of the compact JSON of one call's params.
CHARMING_ROUTES_MAX_PARAMS_BYTES = env.int("CHARMING_ROUTES_MAX_PARAMS_BYTES", default=262144)
# Items (scalars, lists, maps, map keys) in a value a step binds with `as` or a route returns.
CHARMING_ROUTES_MAX_VALUE_ITEMS = env.int("CHARMING_ROUTES_MAX_VALUE_ITEMS", default=10000)
# Characters of text (strings, map keys) in such a value.
CHARMING_ROUTES_MAX_VALUE_CHARS = env.int("CHARMING_ROUTES_MAX_VALUE_CHARS", default=1048576)
# Levels of nesting (lists and maps) in params and in a value a step binds or a route returns.
CHARMING_ROUTES_MAX_VALUE_NESTING = env.int("CHARMING_ROUTES_MAX_VALUE_NESTING", default=64)
# Estimated CEL work in one route call (about 1 s of CPU at the default); see docs/authoring.md, Limits.
CHARMING_ROUTES_MAX_CEL_WORK = env.int("CHARMING_ROUTES_MAX_CEL_WORK", default=20000000)
# Milliseconds one route call may spend evaluating CEL in worker processes (comprehensions, large estimates).
CHARMING_ROUTES_MAX_CEL_MS = env.int("CHARMING_ROUTES_MAX_CEL_MS", default=1000)

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
# Seconds an idle 2025-11-25 session (Mcp-Session-Id) is kept in the worker's memory.
CHARMING_MCP_SESSION_IDLE_SECONDS = env.int("CHARMING_MCP_SESSION_IDLE_SECONDS", default=1800)
