"""Core Django settings."""
from pathlib import Path

import dj_database_url
from django.utils.translation import gettext_lazy as _

from .env import env_bool, env_int, env_list, env_str
from .secrets_file import embedded_mode, key_from_env_or_file

BASE_DIR = Path(__file__).resolve().parent.parent.parent

# `make run` (no DATABASE_URL) keeps generated keys in .secrets/; anything else must set them
# (see config/settings/secrets_file.py and core/checks.py).
EMBEDDED = embedded_mode(BASE_DIR)
SECRET_KEY = key_from_env_or_file("SECRET_KEY", base_dir=BASE_DIR, embedded=EMBEDDED)
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS", "")
# The key that encrypts stored judge API keys (annotation/judging/secrets.py), apart from
# SECRET_KEY so that each can be rotated alone; old keys go in RUBRICA_SECRETS_KEY_FALLBACKS.
RUBRICA_SECRETS_KEY = key_from_env_or_file("RUBRICA_SECRETS_KEY", base_dir=BASE_DIR, embedded=EMBEDDED)
RUBRICA_SECRETS_KEY_FALLBACKS = env_list("RUBRICA_SECRETS_KEY_FALLBACKS", "")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "http://127.0.0.1:8000,http://localhost:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "guardian",
    "axes",
    "csp",
    "core",
    "rubrics",
    "experts",
    "annotation",
    "payments",
]

MIDDLEWARE = [
    "core.request_id.RequestIdMiddleware",
    "core.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "core.middleware.ApiLanguageMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "core.middleware.LazyMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "core.input_guard.InputGuardMiddleware",
    "experts.middleware.NotificationsChangedMiddleware",
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",
    "core.middleware.DomainErrorMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "experts.context_processors.role",
                "experts.context_processors.notifications",
            ],
        },
    }
]

_CONN_MAX_AGE = env_int("DB_CONN_MAX_AGE", 0)
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=_CONN_MAX_AGE,
        # A kept connection is checked before its first use in each request or task (one round trip):
        # after a database restart or failover the first one reconnects instead of failing.
        conn_health_checks=_CONN_MAX_AGE != 0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded mode serves one browser and in-process tasks; WAL and a busy
    # timeout keep an autosave from failing while a submission writes.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool("DB_PREPARED_STATEMENTS", True):
    # Server-side parameters and psycopg's automatic prepared statements: a statement run a second
    # time on a connection is parsed and planned once, then only executed (PostgreSQL keeps planning
    # it anew when a plan for any values looks costlier than one for the values at hand). Planning
    # was most of the database's CPU on the expert's loop: 5.1 s of planning against 3.0 s of
    # execution over 300 next-task and submit pairs (pg_stat_statements). Options given in
    # DATABASE_URL's query string win. Behind a pooler in transaction mode that cannot keep
    # prepared statements (PgBouncer before 1.21), set DB_PREPARED_STATEMENTS=0.
    # The same backend, which sends a query of more than 65,535 parameters bound client-side (core.postgresql).
    DATABASES["default"]["ENGINE"] = "core.postgresql"
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    _options.setdefault("server_side_binding", True)
    _options.setdefault("prepare_threshold", env_int("DB_PREPARE_THRESHOLD", 2))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "experts.User"
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "zh-hans"
LANGUAGES = [("zh-hans", _("Simplified Chinese")), ("en", _("English"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = env_str("TIME_ZONE", "Asia/Shanghai")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
MEDIA_ROOT = BASE_DIR / "media"
# WhiteNoise serves static files in every mode; with finders on, `make run` needs no collectstatic.
WHITENOISE_USE_FINDERS = env_bool("WHITENOISE_USE_FINDERS", True)

# The largest import file. Uploads over FILE_UPLOAD_MAX_MEMORY_SIZE are spooled to a temporary
# file and parsed line by line, so memory stays flat; the cap bounds disk use and request time
# (100,000 HeartBench questions are about 330 MB). The ingress's body limit (platform/k8s)
# must be at least this.
RUBRICA_MAX_IMPORT_BYTES = env_int("RUBRICA_MAX_IMPORT_BYTES", 500 * 1024 * 1024)
# Dataset exports built by a worker: where the files go, how long their download link lives,
# and the license the Hugging Face dataset card declares (an SPDX id, or "other").
RUBRICA_EXPORT_DIR = env_str("RUBRICA_EXPORT_DIR", str(MEDIA_ROOT / "exports"))
RUBRICA_EXPORT_TTL_HOURS = env_int("RUBRICA_EXPORT_TTL_HOURS", 24)
RUBRICA_EXPORT_LICENSE = env_str("RUBRICA_EXPORT_LICENSE", "other")
# Batch operations of a PM on more tasks than this run as a worker job with progress on its page;
# smaller ones are applied in the request that confirms them (annotation.workload.jobs).
BATCH_SYNC_MAX_TASKS = env_int("BATCH_SYNC_MAX_TASKS", 500)
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.api_auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.api.exception_handler",
    # JSON nested too deep or holding control characters is refused with a message (core.input_guard).
    "DEFAULT_PARSER_CLASSES": [
        "core.input_guard.GuardedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # Generous enough for a script working through a project; a runaway client is cut off.
    # Counts live in the default cache (Redis in production, shared by every process), two
    # counters per client and scope (core.throttles).
    "DEFAULT_THROTTLE_CLASSES": [
        "core.throttles.UserThrottle",
        "core.throttles.AnonThrottle",
        "core.throttles.AddressThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": env_str("RUBRICA_API_RATE_USER", "6000/minute"),
        "anon": env_str("RUBRICA_API_RATE_ANON", "600/minute"),
        # One address may carry many experts (an office behind NAT, a load test on loopback).
        "address": env_str("RUBRICA_API_RATE_ADDRESS", "60000/minute"),
    },
    # Proxies in front of the web process whose X-Forwarded-For the throttles trust (0: none).
    "NUM_PROXIES": env_int("RUBRICA_NUM_PROXIES", 0) or None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Rubrica API",
    "DESCRIPTION": "Expert annotation of LLM responses against per-question rubrics.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its docs page need a signed-in user or a token, like the API they describe.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Swagger UI served from our own static files (vendored by drf-spectacular-sidecar):
    # /api/docs/ works offline and under the strict CSP (see core.api_docs).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # Choice sets used under several field names get one schema name each.
    # drf-spectacular's own enum hook, then one Error component and the framework's error
    # statuses on every operation (core.api_schema).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "core.api_schema.error_responses"],
    "ENUM_NAME_OVERRIDES": {
        "ConsultationStatusEnum": "annotation.models.consultations.Consultation.Status",
        "ConsultationOutcomeEnum": "annotation.models.consultations.Outcome",
    },
}

# RUBRICA_LOG_FORMAT=json: one JSON object a line (core.logging.JsonFormatter), for a log collector;
# "plain" (the default): the key=value console lines. Either way every line logged while a request
# is served or a task runs names it (request_id=..., task_id=...), as its audit entries do, and in
# JSON mode each request gets one line from `rubrica.requests` (method, path, status, duration_ms).
RUBRICA_LOG_FORMAT = env_str("RUBRICA_LOG_FORMAT", "plain").strip().lower()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"()": "core.logging.KeyValueFormatter",
                             "format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
                   "json": {"()": "core.logging.JsonFormatter"}},
    "filters": {"request_id": {"()": "core.request_id.RequestIdFilter"},
                "task": {"()": "core.logging.TaskContextFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler",
                             "formatter": "json" if RUBRICA_LOG_FORMAT == "json" else "plain",
                             "filters": ["request_id", "task"]}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
    "loggers": {"rubrica.requests": {
        "level": env_str("RUBRICA_REQUEST_LOG_LEVEL", "INFO" if RUBRICA_LOG_FORMAT == "json" else "WARNING")}},
}

# django-guardian: no anonymous user row (it would show up as an account with the default role).
ANONYMOUS_USER_NAME = None
