"""beeweb settings: every knob comes from the environment through the typed helpers below.

With no variable set, beeweb runs on the embedded default: an SQLite file and Celery's
filesystem broker under ``BEEWEB_DATA_DIR``. ``DATABASE_URL`` and ``CELERY_BROKER_URL``
select the production stack (PostgreSQL through psycopg 3, Redis).
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlparse

from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def envstr(name: str, default: str) -> str:
    return os.environ.get(name, default)


def envbool(name: str, default: str) -> bool:
    value = os.environ.get(name, default).strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {value!r}")


def envint(name: str, default: str) -> int:
    value = os.environ.get(name, default)
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def envrate(name: str, default: str) -> str:
    """A DRF throttle rate such as ``120/minute`` (second, minute, hour or day)."""
    value = os.environ.get(name, default).strip()
    if not re.fullmatch(r"[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)", value):
        raise ImproperlyConfigured(f"{name} must look like 120/minute, got {value!r}")
    return value


def envchoice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def private_dir(path: Path, tighten: bool = False) -> None:
    """Create ``path`` (and its parents) readable by beeweb's user only: 0700. An existing
    directory is left alone unless ``tighten`` (beeweb's own default ``var/``)."""
    if not path.exists():
        path.mkdir(parents=True, mode=0o700, exist_ok=True)
        path.chmod(0o700)
    elif tighten and path.stat().st_uid == os.geteuid():
        path.chmod(0o700)


def private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if missing; an existing file of beeweb's user loses
    any group and other permission bits (an SQLite file holds API tokens and session keys)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        st = path.stat()
        if st.st_uid == os.geteuid() and st.st_mode & 0o077:
            path.chmod(st.st_mode & 0o700)


def database_from_url(name: str, url: str) -> dict:
    """Django DATABASES entry from ``postgres://user:pass@host:port/db`` or ``sqlite:///path``."""
    parsed = urlparse(url)
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        if not parsed.path.strip("/"):
            raise ImproperlyConfigured(f"{name} must name a database: {url!r}")
        try:
            port = parsed.port
        except ValueError:
            raise ImproperlyConfigured(f"{name} has an invalid port: {url!r}") from None
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")),
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(port or ""),
            # JIT off unless the URL says otherwise: beeweb's queries are short, and on the
            # comparison queries whose cost estimate crosses jit_above_cost, compiling took
            # ~115 ms of a 145 ms query (bench/queries.py at 100,000 runs).
            "OPTIONS": {"options": "-c jit=off", **dict(parse_qsl(parsed.query))},
            "CONN_MAX_AGE": envint("DATABASE_CONN_MAX_AGE", "60"),
            "CONN_HEALTH_CHECKS": True,
        }
    if parsed.scheme == "sqlite":
        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ""
        if not path:
            raise ImproperlyConfigured(f"{name} must look like sqlite:///path/to/file: {url!r}")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path}
    raise ImproperlyConfigured(
        f"{name} must start with postgres://, postgresql:// or sqlite:///, got {url!r}"
    )


DATA_DIR = Path(envstr("BEEWEB_DATA_DIR", str(BASE_DIR / "var")))
# Everything under the data directory is beeweb's alone (SQLite file, secret key, broker
# messages, run scratch directories): 0700, and 0600 for the files holding secrets.
private_dir(DATA_DIR, tighten=DATA_DIR == BASE_DIR / "var")

SECRET_KEY = envstr("SECRET_KEY", "")
DEBUG = envbool("DEBUG", "false")
if not SECRET_KEY:
    # The embedded default keeps a generated key beside its database so sessions survive
    # restarts; production sets SECRET_KEY.
    key_file = DATA_DIR / "secret_key"
    if key_file.exists():
        SECRET_KEY = key_file.read_text().strip()
    else:
        import secrets

        SECRET_KEY = secrets.token_urlsafe(50)
        private_file(key_file)
        key_file.write_text(SECRET_KEY)

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "experiments",
    "axes",
    "csp",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "experiments.shared.input_checks.RejectBadTextMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "beeweb.urls"

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

WSGI_APPLICATION = "beeweb.wsgi.application"

_database_url = os.environ.get("DATABASE_URL", "")
if _database_url:
    DATABASES = {"default": database_from_url("DATABASE_URL", _database_url)}
else:
    _sqlite_file = DATA_DIR / "beeweb.sqlite3"
    # Created 0600 before SQLite opens it; SQLite gives its -wal and -shm files the same mode.
    private_file(_sqlite_file)
    for _suffix in ("-wal", "-shm"):
        if (_sqlite_wal := _sqlite_file.with_name(_sqlite_file.name + _suffix)).exists():
            private_file(_sqlite_wal)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(_sqlite_file),
            # The worker and the web server write to the same file.
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL;",
            },
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "experiments:dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = envstr("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(envstr("STATIC_ROOT", str(DATA_DIR / "staticfiles")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing root
# collectstatic (`make demo`, the Docker image) writes each file under a content-hashed name
# with a gzip copy beside it; WhiteNoise serves the gzip copy when the browser asks for it and
# caches hashed names for ten years (immutable). {% static %} reads the manifest collectstatic
# writes; with DEBUG, or before any collectstatic, files come unhashed and uncompressed from
# static/ (WhiteNoise uses the finders then; beeweb.storage). No brotli: it made
# collectstatic take 53 s instead of 3 s, for 17% fewer bytes.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "beeweb.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = DEBUG or not (STATIC_ROOT / "staticfiles.json").exists()

# --- Security -----------------------------------------------------------------------------
# Production is a DATABASE_URL or an explicit BEEWEB_ENV=production; the embedded default
# (`make run`) serves plain HTTP on 127.0.0.1, where Secure cookies would never come back.
BEEWEB_ENV = envchoice(
    "BEEWEB_ENV", "production" if _database_url else "embedded", ("production", "embedded")
)
PRODUCTION = BEEWEB_ENV == "production"
SESSION_COOKIE_SECURE = envbool("SECURE_COOKIES", "true" if PRODUCTION else "false")
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
# Swagger UI ("Try it out" with the session) reads the CSRF cookie; pages use the form token.
CSRF_COOKIE_HTTPONLY = envbool("CSRF_COOKIE_HTTPONLY", "false")
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", "false")
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", "0")
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", "false")
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", "false")
# Behind a reverse proxy that terminates TLS: trust its X-Forwarded-Proto (and the last
# X-Forwarded-For hop as the client address for login and API throttling). Only set this
# when the proxy overwrites those headers and is the only way in.
BEHIND_PROXY = envbool("BEEWEB_BEHIND_PROXY", "false")
if BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = envstr("SECURE_REFERRER_POLICY", "same-origin")
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Content-Security-Policy (django-csp): scripts and everything else from beeweb itself only,
# no inline script, no CDN. plotly.js and Swagger UI inject <style> elements, hence inline
# styles; chart downloads (Plotly.downloadImage) and Swagger UI's icons use data:/blob: images.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:", "blob:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "worker-src": [SELF, "blob:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

# Login throttling (django-axes): BEEWEB_LOGIN_FAILURE_LIMIT wrong passwords for one username
# from one address lock that pair out for BEEWEB_LOGIN_COOLOFF_MINUTES (every further try
# restarts the cool-off); the lockout page answers 429. Attempts live in the database, so
# every web worker sees them.
AUTHENTICATION_BACKENDS = [
    "beeweb.security.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("BEEWEB_LOGIN_FAILURE_LIMIT", "5")
_cooloff_minutes = envint("BEEWEB_LOGIN_COOLOFF_MINUTES", "15")
if AXES_FAILURE_LIMIT < 1 or _cooloff_minutes < 1:
    raise ImproperlyConfigured(
        "BEEWEB_LOGIN_FAILURE_LIMIT and BEEWEB_LOGIN_COOLOFF_MINUTES must be at least 1"
    )
AXES_COOLOFF_TIME = timedelta(minutes=_cooloff_minutes)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "beeweb.security.lockout_response"
AXES_CLIENT_IP_CALLABLE = "beeweb.security.client_ip"
AXES_VERBOSE = False

# The API's throttle counters live in Django's cache: one per process by default; CACHE_URL
# (redis://host:6379/2) shares them between web processes.
_cache_url = envstr("CACHE_URL", "")
if _cache_url:
    if urlparse(_cache_url).scheme not in {"redis", "rediss"}:
        raise ImproperlyConfigured(
            f"CACHE_URL must start with redis:// or rediss://, got {_cache_url!r}"
        )
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _cache_url,
        }
    }

# --- REST API ----------------------------------------------------------------------------
# Tokens for scripts and push clients, the session for the browsable docs. Every endpoint
# needs a signed-in user; writes are checked per object (experiments.api.permissions).
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "beeweb.security.ThrottledTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["experiments.api.permissions.OwnerOrStaffWrites"],
    "DEFAULT_PAGINATION_CLASS": "experiments.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "experiments.api.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    # Generous for scripts and bulk ingest (one request carries up to thousands of runs);
    # a wrong token counts per client address and answers 429 once over its rate.
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": envrate("BEEWEB_API_ANON_RATE", "120/minute"),
        "user": envrate("BEEWEB_API_USER_RATE", "3000/minute"),
        "token_failure": envrate("BEEWEB_API_TOKEN_FAILURE_RATE", "10/minute"),
    },
    # The client address DRF throttles by: REMOTE_ADDR, or the proxy's last X-Forwarded-For hop.
    "NUM_PROXIES": 1 if BEHIND_PROXY else 0,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "beeweb API",
    "DESCRIPTION": "Inventory, tuning sets, matrices, runs, metrics and reports of beeweb. "
    "Authenticate with `Authorization: Token <key>` (manage.py api_token USER, or /api/token/).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI comes from drf-spectacular-sidecar's static files: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No call to swagger.io's online validator (the schema stays here; no CDN, CSP-clean).
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        f"{name}Enum": f"experiments.api.enums.{const}"
        for name, const in [
            ("DriveKind", "DRIVE_KIND"),
            ("NicKind", "NIC_KIND"),
            ("TargetKind", "TARGET_KIND"),
            ("RunStatus", "RUN_STATUS"),
            ("IngestStatus", "INGEST_STATUS"),
            ("IngestResult", "INGEST_RESULT"),
            ("Tool", "TOOL"),
            ("MatrixTool", "MATRIX_TOOL"),
            ("ShareLinkState", "SHARE_LINK_STATE"),
            ("ChangeState", "CHANGE_STATE"),
        ]
    },
}
# Request bodies of bulk ingest (runs with raw output) may be large.
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("BEEWEB_MAX_REQUEST_BYTES", str(64 * 1024 * 1024))

# --- Celery -------------------------------------------------------------------------------
CELERY_BROKER_URL = envstr("CELERY_BROKER_URL", "")
if CELERY_BROKER_URL:
    if urlparse(CELERY_BROKER_URL).scheme not in {"redis", "rediss", "amqp", "filesystem"}:
        raise ImproperlyConfigured(
            "CELERY_BROKER_URL must start with redis://, rediss://, amqp:// or filesystem://, "
            f"got {CELERY_BROKER_URL!r}"
        )
    CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
    if urlparse(CELERY_BROKER_URL).scheme == "redis":
        # kombu's Redis transport, whose channels survive being closed after their
        # connection (a worker that lost Redis died of it: beeweb/broker.py).
        CELERY_BROKER_TRANSPORT = "beeweb.broker:RedisTransport"
else:
    # Embedded default: kombu's filesystem transport needs no server; web and worker share
    # a folder of message files.
    _broker_dir = DATA_DIR / "broker"
    for sub in ("", "queue", "processed", "control"):
        private_dir(_broker_dir / sub)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
if urlparse(CELERY_BROKER_URL).scheme == "filesystem":
    # kombu's filesystem transport, taking messages in the order they were sent (beeweb/broker.py):
    # runs start in their matrix's order.
    CELERY_BROKER_TRANSPORT = "beeweb.broker:Transport"
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", "false")
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fix-up closes the worker's database connection before and after every task
# unless this is set: a new PostgreSQL session (connect, fork of a backend, authentication)
# per run. Set, it closes them every this many tasks; in between, each task starts as a
# Django request does (experiments.execution.tasks: CONN_MAX_AGE, health checks, errors close them).
CELERY_DB_REUSE_MAX = 1000
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
# Seconds between two janitor sweeps (beat); each worker also sweeps once when it starts.
JANITOR_SECONDS = envint("BEEWEB_JANITOR_SECONDS", "30")
if JANITOR_SECONDS < 1:
    raise ImproperlyConfigured(f"BEEWEB_JANITOR_SECONDS must be 1 or more, got {JANITOR_SECONDS}")
# Beat keeps its schedule in the database (django-celery-beat): the entries below, and one
# per scheduled matrix (experiments.matrices.schedules keeps them in step with the matrix's
# schedule); it looks for changes every 5 s.
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Seconds between two checks of the scheduled matrices' firings (finished, missing runs,
# firings that did not arrive) and of alert deliveries whose message was lost.
SCHEDULE_CHECK_SECONDS = envint("BEEWEB_SCHEDULE_CHECK_SECONDS", "60")
if SCHEDULE_CHECK_SECONDS < 1:
    raise ImproperlyConfigured(
        f"BEEWEB_SCHEDULE_CHECK_SECONDS must be 1 or more, got {SCHEDULE_CHECK_SECONDS}"
    )
CELERY_BEAT_SCHEDULE = {
    # Requeue or fail runs whose worker stopped sending heartbeats; send again runs whose
    # message the broker lost; finish cancels of runs whose worker is gone.
    "janitor": {"task": "runners.janitor", "schedule": JANITOR_SECONDS},
    "schedules": {"task": "matrices.check_schedules", "schedule": SCHEDULE_CHECK_SECONDS},
}

# --- Scheduled matrices and alerts ----------------------------------------------------------
# A firing whose testbed's nodes are held by other runs tries again every few seconds for
# this long, then is recorded as not run ("nodes held too long") and alerted.
SCHEDULE_HOLD_WAIT_SECONDS = envint("BEEWEB_SCHEDULE_HOLD_WAIT_SECONDS", "900")
# An enabled schedule whose expected firing is this late is alerted ("no firing arrived").
SCHEDULE_LATE_SECONDS = envint("BEEWEB_SCHEDULE_LATE_SECONDS", "300")
# Deliveries: attempts per channel, the first retry's delay (doubling after each), and the
# webhook's timeout (connect and read). E-mail uses Django's EMAIL_* settings below.
ALERT_MAX_ATTEMPTS = envint("BEEWEB_ALERT_MAX_ATTEMPTS", "5")
ALERT_RETRY_SECONDS = envint("BEEWEB_ALERT_RETRY_SECONDS", "30")
WEBHOOK_TIMEOUT_SECONDS = envint("BEEWEB_WEBHOOK_TIMEOUT_SECONDS", "10")
# Whether a webhook may point at a loopback, private or link-local address (a service
# inside the lab's network, or a test's receiver); refused by default (SECURITY.md).
WEBHOOK_ALLOW_PRIVATE = envbool("BEEWEB_WEBHOOK_ALLOW_PRIVATE", "false")
# The address alert texts link to (e.g. https://beeweb.example.org); empty: no links.
BASE_URL = envstr("BEEWEB_BASE_URL", "").rstrip("/")
for _name, _value in (
    ("BEEWEB_SCHEDULE_HOLD_WAIT_SECONDS", SCHEDULE_HOLD_WAIT_SECONDS),
    ("BEEWEB_SCHEDULE_LATE_SECONDS", SCHEDULE_LATE_SECONDS),
    ("BEEWEB_ALERT_RETRY_SECONDS", ALERT_RETRY_SECONDS),
):
    if _value < 0:
        raise ImproperlyConfigured(f"{_name} must be 0 or more, got {_value}")
if ALERT_MAX_ATTEMPTS < 1 or WEBHOOK_TIMEOUT_SECONDS < 1:
    raise ImproperlyConfigured(
        "BEEWEB_ALERT_MAX_ATTEMPTS and BEEWEB_WEBHOOK_TIMEOUT_SECONDS must be at least 1"
    )
if BASE_URL and urlparse(BASE_URL).scheme not in {"http", "https"}:
    raise ImproperlyConfigured(
        f"BEEWEB_BASE_URL must start with https:// or http://, got {BASE_URL!r}"
    )
# E-mail (Django's own settings, from the environment): an SMTP server, or the console
# backend (EMAIL_BACKEND=django.core.mail.backends.console.EmailBackend) to print them.
EMAIL_BACKEND = envstr("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = envstr("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", "25")
EMAIL_HOST_USER = envstr("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = envstr("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", "false")
EMAIL_USE_SSL = envbool("EMAIL_USE_SSL", "false")
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", "10")
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "beeweb@localhost")
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL exclude each other")
# --- Change points (experiments.changes) ----------------------------------------------------
# Seconds between two detection sweeps (beat): configurations whose runs changed since their
# last analysis are analysed again (at most CHANGES_BATCH per sweep).
CHANGES_SECONDS = envint("BEEWEB_CHANGES_SECONDS", "60")
CHANGES_BATCH = envint("BEEWEB_CHANGES_BATCH", "200")
# E-divisive means: the largest p-value of a change point, the permutations of its test,
# the least runs on either side, the seed of the permutations (the same history always gives
# the same change points), and the runs one analysis reads (the newest; an import of more is
# analysed in overlapping windows of this many).
try:
    CHANGES_ALPHA = float(envstr("BEEWEB_CHANGES_ALPHA", "0.01"))
except ValueError:
    raise ImproperlyConfigured(
        f"BEEWEB_CHANGES_ALPHA must be a number, got {os.environ['BEEWEB_CHANGES_ALPHA']!r}"
    ) from None
CHANGES_PERMUTATIONS = envint("BEEWEB_CHANGES_PERMUTATIONS", "199")
CHANGES_MIN_SIZE = envint("BEEWEB_CHANGES_MIN_SIZE", "4")
CHANGES_SEED = envint("BEEWEB_CHANGES_SEED", "1234")
CHANGES_WINDOW = envint("BEEWEB_CHANGES_WINDOW", "500")
if not 0 < CHANGES_ALPHA < 1:
    raise ImproperlyConfigured(f"BEEWEB_CHANGES_ALPHA must be in (0, 1), got {CHANGES_ALPHA}")
for _name, _value, _least in (
    ("BEEWEB_CHANGES_SECONDS", CHANGES_SECONDS, 1),
    ("BEEWEB_CHANGES_BATCH", CHANGES_BATCH, 1),
    ("BEEWEB_CHANGES_PERMUTATIONS", CHANGES_PERMUTATIONS, 19),
    ("BEEWEB_CHANGES_MIN_SIZE", CHANGES_MIN_SIZE, 2),
    ("BEEWEB_CHANGES_WINDOW", CHANGES_WINDOW, 20),
):
    if _value < _least:
        raise ImproperlyConfigured(f"{_name} must be {_least} or more, got {_value}")
CELERY_BEAT_SCHEDULE["changes"] = {"task": "changes.detect", "schedule": CHANGES_SECONDS}

# --- Execution ----------------------------------------------------------------------------
# Per-run scratch directories (hostfiles, job files, the tool's output log) on worker nodes.
RUN_DIR = Path(envstr("BEEWEB_RUN_DIR", str(DATA_DIR / "runs")))
# A running run whose worker has not written a heartbeat for this long is orphaned.
RUN_STALE_SECONDS = envint("BEEWEB_RUN_STALE_SECONDS", "60")
# Attempts before an orphaned run is failed instead of requeued.
RUN_MAX_ATTEMPTS = envint("BEEWEB_RUN_MAX_ATTEMPTS", "2")
# A run queued for this long on a queue whose worker is online and has been idle as long is
# sent again with a fresh token (its message was lost, e.g. by a broker restart); 0: never.
RUN_REDISPATCH_SECONDS = envint("BEEWEB_RUN_REDISPATCH_SECONDS", "120")
# Seconds between a running run's output/heartbeat writes to the database.
RUN_PROGRESS_SECONDS = float(envstr("BEEWEB_RUN_PROGRESS_SECONDS", "2"))
# How long a worker keeps trying a write of a run's attempt (its heartbeats while the tool
# runs, the store of its outcome, the release of its nodes) while the database is unreachable
# (a PostgreSQL restart or failover) before it gives the attempt up; its tool keeps running
# meanwhile. The janitor takes a run whose heartbeats stop for RUN_STALE_SECONDS anyway.
DB_RETRY_SECONDS = float(envstr("BEEWEB_DB_RETRY_SECONDS", "120"))
# How long a testbed's import from its live cluster, and the check of its live topology
# before a launch, wait for the asked node's agent (experiments.execution.noderequests).
LIVE_TOPOLOGY_SECONDS = float(envstr("BEEWEB_LIVE_TOPOLOGY_SECONDS", "45"))
LIVE_CHECK_SECONDS = float(envstr("BEEWEB_LIVE_CHECK_SECONDS", "15"))
# What this node lets a worker do, whatever the server asks (experiments/execution/nodepolicy.py
# parses and
# checks them): colon-separated directories runs may work in (empty: DATA_DIR only), and
# false / true / a comma-separated list of the tuning keys a run may apply (default: none),
# whether runs holding the node may drop its caches and whether its node agent samples
# its telemetry for runs launched elsewhere (both default: true).
NODE_DIRS = envstr("BEEWEB_NODE_DIRS", "")
NODE_TUNING = envstr("BEEWEB_NODE_TUNING", "false")
NODE_DROP_CACHES = envstr("BEEWEB_NODE_DROP_CACHES", "true")
NODE_TELEMETRY = envstr("BEEWEB_NODE_TELEMETRY", "true")
# Whether beeweb may rewrite this node's BeeGFS service config files and restart the services
# (default: false), where they are, how each restarts, beegfs-ctl's argv and this node's BeeGFS
# node name (default: the hostname); read by nodepolicy, never from the database.
NODE_BEEGFS = envstr("BEEWEB_NODE_BEEGFS", "false")
NODE_BEEGFS_STORAGE_CONF = envstr(
    "BEEWEB_NODE_BEEGFS_STORAGE_CONF", "/etc/beegfs/beegfs-storage.conf"
)
NODE_BEEGFS_STORAGE_RESTART = envstr(
    "BEEWEB_NODE_BEEGFS_STORAGE_RESTART", "systemctl restart beegfs-storage"
)
NODE_BEEGFS_META_CONF = envstr("BEEWEB_NODE_BEEGFS_META_CONF", "/etc/beegfs/beegfs-meta.conf")
NODE_BEEGFS_META_RESTART = envstr(
    "BEEWEB_NODE_BEEGFS_META_RESTART", "systemctl restart beegfs-meta"
)
NODE_BEEGFS_NODE_NAME = envstr("BEEWEB_NODE_BEEGFS_NODE_NAME", "")
BEEGFS_CTL = envstr("BEEWEB_BEEGFS_CTL", "beegfs-ctl")
# Upper bound on the runs one matrix may expand into.
MATRIX_MAX_RUNS = envint("BEEWEB_MATRIX_MAX_RUNS", "20000")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    # django-axes logs every login at INFO; failures and lockouts are warnings.
    "loggers": {"django.db.backends": {"level": "INFO"}, "axes": {"level": "WARNING"}},
}
