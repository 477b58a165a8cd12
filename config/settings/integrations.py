"""Celery, Redis cache and the other services Rubrica talks to."""
from .env import env_bool, env_int, env_list, env_str

REDIS_URL = env_str("REDIS_URL", "")

# Without a broker (the embedded mode) tasks run in-process, eagerly.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL or "memory://")
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", REDIS_URL or "cache+memory://")
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", not REDIS_URL or env_bool("CELERY_EAGER", False))
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fixup closes the database connection before and after every task unless this is
# set: each follow-up then paid a new PostgreSQL session (a backend started, its catalog caches
# filled, its prepared statements lost). Set past reach, the fixup never closes it; config/celery.py
# closes it instead the way a request does, by CONN_MAX_AGE, CONN_HEALTH_CHECKS and errors.
CELERY_DB_REUSE_MAX = 10**9
# The worker's processes run at this nice level (0 to 19; 0 leaves them as started): everything the
# worker does is background work (follow-ups, agreement reports, exports), and on a host it shares
# with the web process it should take the CPU the web's requests leave, not the other way round.
# An agreement report of a large project takes a core for a second or more; at the same priority
# it doubled the experts' waits while it ran (bench/assignment.py). Where the worker has a machine
# or a CPU quota of its own (platform/k8s/worker.yaml) the level changes nothing.
RUBRICA_WORKER_NICE = env_int("RUBRICA_WORKER_NICE", 10)
# Parallel helpers a statement of the worker's may use (PostgreSQL's max_parallel_workers_per_gather, for
# the worker's sessions only): 0 keeps a large report's scans on one core, beside the web; a database
# server of its own with cores to spare may allow more (config/celery.py).
RUBRICA_WORKER_DB_PARALLEL = env_int("RUBRICA_WORKER_DB_PARALLEL", 0)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 300)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 360)
# A message a killed worker had taken comes back to the queue after this many seconds (Redis
# transport). Longer than the longest task (agreement: 960 s), or a slow task would run twice.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT_S", 3600)}
CELERY_BEAT_SCHEDULE = {
    # Follow-up work the broker never took (it was down at commit) or a lost worker dropped.
    "outbox-sweep": {"task": "core.outbox_sweep", "schedule": 60.0},
    "expire-leases": {"task": "annotation.leases_expire", "schedule": 60.0},
    # Consultations: reveal blind votes past their deadline (pages reveal them on read too).
    # Review: lease, idle, quality and deadline reminders; returned submissions left unfixed go back.
    "reminders-send": {"task": "annotation.reminders_send", "schedule": 300.0},
    "consultations-reveal-due": {"task": "annotation.consultations_reveal_due", "schedule": 300.0},
    # Payments: post earnings a lost task left out, then close periods whose end has passed.
    "payments-sweep-earnings": {"task": "payments.earnings_sweep", "schedule": 300.0},
    "payments-settle-due-periods": {"task": "payments.periods_settle_due", "schedule": 600.0},
    # Imports: search rows a lost follow-up task left unwritten (a quick check when there are none).
    "question-search-index": {"task": "annotation.question_search_index", "schedule": 600.0},
    # Exports: delete expired files, mark failed what stopped without saying so.
    "exports-sweep": {"task": "annotation.exports_sweep", "schedule": 900.0},
    # Webhook messages whose delivery chain a dead worker or a lost task broke.
    "webhooks-sweep": {"task": "annotation.webhooks_sweep", "schedule": 600.0},
    # Notification emails a lost task or a mail server outage left pending.
    "experts-notification-emails-sweep": {"task": "experts.notification_emails_sweep", "schedule": 300.0},
}

# The cache holds nothing that must survive (throttle counters, progress figures, the board's
# filter choices), so while Redis is down it answers "not cached" and writes nothing instead of
# failing the request: submissions keep working and their follow-up work waits in the outbox.
# django-redis does this (IGNORE_EXCEPTIONS, logged); Django's own Redis backend raises.
CACHE_REDIS_TIMEOUT_S = float(env_str("RUBRICA_CACHE_REDIS_TIMEOUT_S", "2"))


def redis_cache(location: str) -> dict:
    return {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": location,
            "OPTIONS": {"IGNORE_EXCEPTIONS": True, "SOCKET_CONNECT_TIMEOUT": CACHE_REDIS_TIMEOUT_S,
                        "SOCKET_TIMEOUT": CACHE_REDIS_TIMEOUT_S}}


DJANGO_REDIS_LOG_IGNORED_EXCEPTIONS = True


if REDIS_URL:
    CACHES = {"default": redis_cache(REDIS_URL)}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Outbox (core.outbox): how long a sent task may take before the sweep sends it again, how many
# sends before it is left to an operator, and how long done rows are kept.
RUBRICA_OUTBOX_RETRY_AFTER_S = env_int("RUBRICA_OUTBOX_RETRY_AFTER_S", 600)
RUBRICA_OUTBOX_MAX_ATTEMPTS = env_int("RUBRICA_OUTBOX_MAX_ATTEMPTS", 10)
RUBRICA_OUTBOX_KEEP_DONE_S = env_int("RUBRICA_OUTBOX_KEEP_DONE_S", 86400)

# LLM judge runs (annotation.judging): per-request timeout, retries with backoff for 429/5xx and
# timeouts, and how long one Celery task walks a run before handing over to a fresh task.
RUBRICA_JUDGE_TIMEOUT_S = float(env_str("RUBRICA_JUDGE_TIMEOUT_S", "60"))
RUBRICA_JUDGE_MAX_RETRIES = env_int("RUBRICA_JUDGE_MAX_RETRIES", 4)
RUBRICA_JUDGE_BACKOFF_BASE_S = float(env_str("RUBRICA_JUDGE_BACKOFF_BASE_S", "0.5"))
RUBRICA_JUDGE_BACKOFF_MAX_S = float(env_str("RUBRICA_JUDGE_BACKOFF_MAX_S", "20"))
RUBRICA_JUDGE_STEP_BUDGET_S = float(env_str("RUBRICA_JUDGE_STEP_BUDGET_S", "120"))
# Added to a claim's length (twice the slowest possible ask): how long after a worker died
# another walker may ask about the task it held.
RUBRICA_JUDGE_CLAIM_MARGIN_S = float(env_str("RUBRICA_JUDGE_CLAIM_MARGIN_S", "60"))
# Environment variables an admin may name as a judge run's key ("PREFIX_*" allows a prefix), on a
# project that also holds a grant for the variable (JudgeKeyGrant, Django admin); PMs type keys in.
# A list, because a worker's environment also holds the database password and SECRET_KEY,
# and a run sends its key to the URL of the run. Judge requests go through core.outbound.
RUBRICA_JUDGE_KEY_ENV_ALLOWED = env_list("RUBRICA_JUDGE_KEY_ENV_ALLOWED", "OPENAI_API_KEY,RUBRICA_JUDGE_KEY_*")

# Agreement engine: debounce of recomputes as labels arrive, drift alerts, bootstrap size.
RUBRICA_AGREEMENT_DEBOUNCE_S = env_int("RUBRICA_AGREEMENT_DEBOUNCE_S", 30)
RUBRICA_DRIFT_MARGIN = float(env_str("RUBRICA_DRIFT_MARGIN", "0.10"))
RUBRICA_DRIFT_WINDOW = env_int("RUBRICA_DRIFT_WINDOW", 100)
# 200: with 100 the calibrated drift rule caught a 15-point drop only 81% of the time (bench/drift_calibration.py).
RUBRICA_DRIFT_BASELINE = env_int("RUBRICA_DRIFT_BASELINE", 200)
# Project-wide false-alert rate per stable expert of the calibrated drift rule (annotation/agreement/stats/drift.py).
RUBRICA_DRIFT_ALPHA = float(env_str("RUBRICA_DRIFT_ALPHA", "0.05"))
RUBRICA_AGREEMENT_BOOTSTRAP = env_int("RUBRICA_AGREEMENT_BOOTSTRAP", 1000)

# Email (notifications the user opted in to, per kind). Without EMAIL_HOST the embedded mode
# prints mail to the console; with it, Django's SMTP backend sends through that server.
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST
                        else "django.core.mail.backends.console.EmailBackend")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
# A send holds its notification's row lock, so a hanging mail server must not hold it long.
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Rubrica <noreply@localhost>")
# How often the top bar asks for the unread count (seconds); htmx actions that notify refresh it at once.
RUBRICA_NOTIFICATION_POLL_S = env_int("RUBRICA_NOTIFICATION_POLL_S", 45)
# Links in emails are absolute: this is where users reach the site.
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000").rstrip("/")
# Attempts before a notification's email is given up (status "failed", kept for an admin to resend),
# and how long a pending email waits before the sweep sends it again.
RUBRICA_NOTIFICATION_EMAIL_MAX_ATTEMPTS = env_int("RUBRICA_NOTIFICATION_EMAIL_MAX_ATTEMPTS", 20)
RUBRICA_NOTIFICATION_EMAIL_RETRY_AFTER_S = env_int("RUBRICA_NOTIFICATION_EMAIL_RETRY_AFTER_S", 300)

# Outbound requests to URLs users set (webhooks, judge runs; core.outbound): hosts an admin allows by name,
# comma-separated. They may use http:// and resolve to any address (tests name a loopback server);
# every other host must be https:// and resolve only to public addresses.
RUBRICA_OUTBOUND_ALLOWED_HOSTS = env_list("RUBRICA_OUTBOUND_ALLOWED_HOSTS", "")

# Webhooks: per-attempt timeout, attempts before a message is given up, backoff between attempts.
RUBRICA_WEBHOOK_TIMEOUT_S = float(env_str("RUBRICA_WEBHOOK_TIMEOUT_S", "10"))
RUBRICA_WEBHOOK_MAX_ATTEMPTS = env_int("RUBRICA_WEBHOOK_MAX_ATTEMPTS", 6)
RUBRICA_WEBHOOK_BACKOFF_BASE_S = float(env_str("RUBRICA_WEBHOOK_BACKOFF_BASE_S", "30"))
RUBRICA_WEBHOOK_BACKOFF_MAX_S = float(env_str("RUBRICA_WEBHOOK_BACKOFF_MAX_S", "3600"))

# `/metrics` (core.metrics): the bearer token a Prometheus scraper sends (admins signed in need
# none; without it only they can read the metrics), and broker queues measured beside "celery".
RUBRICA_METRICS_TOKEN = env_str("RUBRICA_METRICS_TOKEN", "")
RUBRICA_METRICS_QUEUES = env_list("RUBRICA_METRICS_QUEUES", "")
