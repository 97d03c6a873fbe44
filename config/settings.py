"""Settings read from the environment.

With no configuration the portal runs embedded: SQLite, Celery tasks executed in-process, the sandbox
cluster and demo data. `PORTAL_MODE=production` switches to the hardened shape and requires a secret key,
a database URL and allowed hosts. Every variable is listed in docs/operations.md.
"""

import os
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PORTAL_VAR_DIR", BASE_DIR / "var"))


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in env(name, default).split(",") if item.strip()]


PORTAL_MODE = env("PORTAL_MODE", "demo")
if PORTAL_MODE not in {"demo", "production"}:
    raise ImproperlyConfigured("PORTAL_MODE must be 'demo' or 'production'")
PRODUCTION = PORTAL_MODE == "production"

if PRODUCTION:
    for required in ("SECRET_KEY", "DATABASE_URL", "ALLOWED_HOSTS"):
        if not env(required):
            raise ImproperlyConfigured(f"{required} must be set when PORTAL_MODE=production")

SECRET_KEY = env("SECRET_KEY", "demo-only-insecure-key-do-not-use-in-production")
# Off in the demo too: a newcomer meets the portal's own 404 and 403 pages, not Django's debug page listing every URL
# (DJANGO_DEBUG=1 brings it back while developing).
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",  # runserver too serves static files through WhiteNoise: compressed, cached
    "django.contrib.staticfiles",
    "django_htmx",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "tenants",
    "backends",
    "quotas",
    "jobs",
    "billing",
    "workspaces",
    "composition",
]

MIDDLEWARE = [
    "portal.metrics.RequestMetricsMiddleware",  # first: times everything below, error pages included
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "portal.limits.RequestLimitsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last: turns a lockout found while authenticating into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

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
                "quotas.context_processors.console_counts",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{VAR_DIR / 'portal.sqlite3'}"),
        conn_max_age=int(env("DATABASE_CONN_MAX_AGE", "60")),
    )
}
# A reused connection is checked before each request that reuses it, so a database restart costs no failed request.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Concurrent writers (runserver's threads, in-process tasks) wait for each other instead of failing with
    # "database is locked": a transaction takes the write lock when it begins (IMMEDIATE), so it never has to
    # upgrade a read lock mid-way (which SQLite refuses at once, without waiting), and waits up to the busy
    # timeout for it; in WAL mode readers never wait for the writer.
    DATABASES["default"].setdefault("OPTIONS", {}).update({
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    })
    DATABASES["default"]["CONN_MAX_AGE"] = 0
# runserver serves each HTTP connection on a thread of its own, and a persistent database connection outlives
# that thread: every browser connection would leave one open until the server ran out ("too many clients").
if sys.argv[1:2] == ["runserver"]:
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# The largest request body accepted (bytes): API bodies are a few kilobytes; a larger one is a 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(env("DATA_UPLOAD_MAX_MEMORY_SIZE", str(1024 * 1024)))

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "tenants:dashboard"
LOGOUT_REDIRECT_URL = "login"

# Single sign-on (OpenID Connect, authorization code flow) is on when a client id is set; local accounts keep
# working beside it. Endpoints are given explicitly so that starting the portal never waits on the provider.
OIDC_RP_CLIENT_ID = env("OIDC_RP_CLIENT_ID")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_RP_CLIENT_SECRET = env("OIDC_RP_CLIENT_SECRET")
OIDC_OP_ISSUER = env("OIDC_OP_ISSUER")
OIDC_OP_AUTHORIZATION_ENDPOINT = env("OIDC_OP_AUTHORIZATION_ENDPOINT")
OIDC_OP_TOKEN_ENDPOINT = env("OIDC_OP_TOKEN_ENDPOINT")
OIDC_OP_USER_ENDPOINT = env("OIDC_OP_USER_ENDPOINT")
OIDC_OP_JWKS_ENDPOINT = env("OIDC_OP_JWKS_ENDPOINT")
OIDC_RP_SIGN_ALGO = env("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env("OIDC_RP_SCOPES", "openid email profile groups")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = float(env("OIDC_TIMEOUT", "10"))
OIDC_USERNAME_CLAIM = env("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_GROUPS_CLAIM = env("OIDC_GROUPS_CLAIM", "groups")
OIDC_ADMIN_GROUP_SUFFIX = env("OIDC_ADMIN_GROUP_SUFFIX", "-admins")
OIDC_VIEWER_GROUP_SUFFIX = env("OIDC_VIEWER_GROUP_SUFFIX", "-viewers")
OIDC_PLATFORM_ADMIN_GROUP = env("OIDC_PLATFORM_ADMIN_GROUP")
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"
LOGIN_REDIRECT_URL_FAILURE = "/login/"  # a path: the library does not resolve URL names here
# First: refuses every sign-in of a locked-out username or address before a password is even checked.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
if OIDC_ENABLED:
    _oidc_required = ("OIDC_RP_CLIENT_SECRET", "OIDC_OP_ISSUER", "OIDC_OP_AUTHORIZATION_ENDPOINT",
                      "OIDC_OP_TOKEN_ENDPOINT", "OIDC_OP_USER_ENDPOINT", "OIDC_OP_JWKS_ENDPOINT")
    _oidc_missing = [name for name in _oidc_required if not env(name)]
    if _oidc_missing:
        raise ImproperlyConfigured(f"OIDC_RP_CLIENT_ID is set, so these must be too: {', '.join(_oidc_missing)}")
    AUTHENTICATION_BACKENDS.append("tenants.auth.PortalOIDCBackend")

# Password guessing (django-axes): LOGIN_FAILURE_LIMIT failures lock the username, and separately the address, for
# LOGIN_LOCKOUT_MINUTES after the last failure, on the login page, the Django admin and for bearer tokens
# (portal/lockout.py). Each lockout is an audit event; failed attempts are listed in the Django admin.
AXES_FAILURE_LIMIT = int(env("LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(env("LOGIN_LOCKOUT_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = "portal.lockout.lockout_parameters"
AXES_CLIENT_IP_CALLABLE = "portal.lockout.client_ip"
AXES_HANDLER = "portal.lockout.LockoutHandler"
# The addresses (CIDRs) of the reverse proxies in front of the portal (the ingress controller's pods, a load
# balancer): from them, and only from them, X-Forwarded-For names the client. Empty: the connecting address is
# the client's, which behind an ingress is the ingress's for every user.
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES")
AXES_LOCKOUT_CALLABLE = "portal.lockout.lockout_response"
AXES_RESET_ON_SUCCESS = True
AXES_SENSITIVE_PARAMETERS = ["password", "token"]
# No start-up banner from every process and management command (django-axes axes/apps.py prints it when verbose).
AXES_VERBOSE = False

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# plotly.js is plotly's cartesian bundle from npm (package.json: the version the plotly package bundles), copied
# into the git-ignored static/vendor/ by `make install` and the image's build stage, so charts work offline.
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# Both modes serve the collected copies (`make run` and the image run collectstatic), gzip-compressed at collection
# time: plotly.js is 1.5 MB raw and 0.5 MB gzipped. Production's names also carry a content hash, so browsers
# cache them for ever; the demo keeps plain names, so a template edit needs no manifest.
WHITENOISE_USE_FINDERS = False
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "whitenoise.storage.CompressedStaticFilesStorage"
    },
}

EMAIL_BACKEND = env("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "gpu-portal@localhost")

# Celery: with REDIS_URL the portal uses real workers and beat; without it tasks run in-process.
REDIS_URL = env("REDIS_URL")
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_DEFAULT_QUEUE = env("CELERY_DEFAULT_QUEUE", "celery")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Sending a task after a write gives up within about a second when the broker is away (portal/enqueue.py logs it and
# the due sweeps pick the row up), rather than holding the request for kombu's default of several retries.
CELERY_BROKER_CONNECTION_TIMEOUT = 1
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
RECONCILE_SWEEP_SECONDS = int(env("RECONCILE_SWEEP_SECONDS", "900"))  # a safety net: the watcher nudges on drift
RECONCILE_DUE_SECONDS = int(env("RECONCILE_DUE_SECONDS", "5"))
JOB_SYNC_SECONDS = int(env("JOB_SYNC_SECONDS", "10"))
# The cluster watcher (`manage.py watch_clusters`): which clusters it watches ("*", or comma-separated names; the
# others, or all while no watcher holds a cluster's lease, keep the polling sync), its lease, and its loop.
WATCH_CLUSTERS = env_list("WATCH_CLUSTERS", "*")
WATCH_LEASE_SECONDS = float(env("WATCH_LEASE_SECONDS", "5"))
WATCH_FLUSH_SECONDS = float(env("WATCH_FLUSH_SECONDS", "0.1"))
WATCH_TIMEOUT_SECONDS = int(env("WATCH_TIMEOUT_SECONDS", "300"))
WATCH_BACKOFF_MAX_SECONDS = float(env("WATCH_BACKOFF_MAX_SECONDS", "30"))
WATCH_RELIST_SECONDS = float(env("WATCH_RELIST_SECONDS", "30"))
# A reconcile nudge that never arrives (lost message, dead worker) is picked up after this lease.
RECONCILE_LEASE_SECONDS = int(env("RECONCILE_LEASE_SECONDS", "30"))
# How often holds are judged again (budgets, allowances over their rolling windows, overrides expiring).
BUDGET_ENFORCE_SECONDS = float(env("BUDGET_ENFORCE_SECONDS", "60"))
# How long a held Kueue workload may keep its quota reservation before it is sent back (Retry) to queue again that
# many seconds later, so a held team's pending jobs do not keep quota other teams could use (0: keep it).
BUDGET_HOLD_RESERVATION_SECONDS = int(env("BUDGET_HOLD_RESERVATION_SECONDS", "600"))
# On tiers whose budget-hold action is "suspend": how long after a hold starts its running jobs are suspended (their
# submitters are told when it starts, so work can be checkpointed).
BUDGET_HOLD_SUSPEND_MINUTES = float(env("BUDGET_HOLD_SUSPEND_MINUTES", "15"))
CELERY_BEAT_SCHEDULE = {
    "reconcile-due": {"task": "composition.tasks.reconcile_due_task", "schedule": RECONCILE_DUE_SECONDS},
    "reconcile-sweep": {"task": "composition.tasks.reconcile_sweep_task", "schedule": RECONCILE_SWEEP_SECONDS},
    "quota-expiry": {"task": "quotas.tasks.quota_expire_due_task", "schedule": 60},
    "reservations": {"task": "quotas.tasks.reservation_apply_due_task", "schedule": 60},
    "job-reconcile-due": {"task": "jobs.tasks.job_reconcile_due_task", "schedule": RECONCILE_DUE_SECONDS},
    "workspace-reconcile-due": {"task": "workspaces.tasks.workspace_reconcile_due_task",
                                "schedule": RECONCILE_DUE_SECONDS},
    "job-idle-rule": {"task": "billing.tasks.job_idle_rule_task",
                      "schedule": float(env("WORKSPACE_CULL_SECONDS", "60"))},
    "workspace-cull": {"task": "workspaces.tasks.workspace_cull_task",
                       "schedule": float(env("WORKSPACE_CULL_SECONDS", "60"))},
    "job-status-sync": {"task": "jobs.tasks.job_status_sync_task", "schedule": JOB_SYNC_SECONDS},
    "idempotency-prune": {"task": "tenants.tasks.idempotency_keys_prune_task", "schedule": 3600},
    "job-estimates-stale": {"task": "jobs.tasks.job_estimates_refresh_stale_task", "schedule": 60},
    "budget-check": {"task": "billing.tasks.budget_check_task", "schedule": 3600},
    "budget-enforce": {"task": "billing.tasks.budget_enforce_task", "schedule": BUDGET_ENFORCE_SECONDS},
    # A few minutes past the hour, so the exporters' last samples of the hour that just ended are in.
    "usage-collect": {"task": "billing.tasks.usage_collect_task", "schedule": crontab(minute=5)},
}
QUOTA_EXPIRY_NOTICE_DAYS = int(env("QUOTA_EXPIRY_NOTICE_DAYS", "3"))
# Chargeback: one currency for rate cards, statements and budgets; budget alerts fire once per threshold (percent);
# a running job is idle when its GPU utilisation (0..1) stayed under the threshold for every hour of the window.
BILLING_CURRENCY = env("BILLING_CURRENCY", "USD")
BUDGET_ALERT_THRESHOLDS = [int(t) for t in env_list("BUDGET_ALERT_THRESHOLDS", "80,100")]
IDLE_GPU_THRESHOLD = float(env("IDLE_GPU_THRESHOLD", "0.05"))
IDLE_GPU_WINDOW_HOURS = int(env("IDLE_GPU_WINDOW_HOURS", "2"))
# Workspaces: the images engineers pick from, per tool (a comma-separated list each), or any image where the
# platform allows it; the volume's storage class ('' for the cluster's default); the host of a workspace's Ingress
# (`{workspace}` and `{team}` filled in; '' for none, and the page gives the `kubectl port-forward` command).
WORKSPACE_IMAGES = {
    "jupyterlab": env_list("WORKSPACE_JUPYTERLAB_IMAGES", "quay.io/jupyter/pytorch-notebook:cuda12-python-3.12,"
                                                          "quay.io/jupyter/scipy-notebook:python-3.12"),
    "code-server": env_list("WORKSPACE_CODE_SERVER_IMAGES", "codercom/code-server:4.100.2"),
}
WORKSPACE_ANY_IMAGE = env_bool("WORKSPACE_ANY_IMAGE", False)
WORKSPACE_STORAGE_CLASS = env("WORKSPACE_STORAGE_CLASS")
WORKSPACE_HOST_PATTERN = env("WORKSPACE_HOST_PATTERN")
WORKSPACE_INGRESS_CLASS = env("WORKSPACE_INGRESS_CLASS")
# Culling by what the GPUs do: idle (activity under the threshold, 0..1) for WARN minutes → a warning; still idle
# SUSPEND minutes after it → suspended (the volume stays); suspended for VOLUME_DAYS → the volume is deleted, or
# kept when the policy is "keep". "Keep it running" holds it off EXTENSION minutes, once per warning.
WORKSPACE_IDLE_THRESHOLD = float(env("WORKSPACE_IDLE_THRESHOLD", env("IDLE_GPU_THRESHOLD", "0.05")))
WORKSPACE_WARN_MINUTES = float(env("WORKSPACE_WARN_MINUTES", "60"))
WORKSPACE_SUSPEND_MINUTES = float(env("WORKSPACE_SUSPEND_MINUTES", "30"))
WORKSPACE_EXTENSION_MINUTES = float(env("WORKSPACE_EXTENSION_MINUTES", "120"))
WORKSPACE_VOLUME_DAYS = float(env("WORKSPACE_VOLUME_DAYS", "14"))
WORKSPACE_VOLUME_POLICY = env("WORKSPACE_VOLUME_POLICY", "delete")
# The same idle rule for running batch jobs, on the tiers whose idle action allows it (the tier page): warned after
# WARN minutes idle, stopped STOP minutes after the warning where the tier says "suspend".
JOB_IDLE_THRESHOLD = float(env("JOB_IDLE_THRESHOLD", env("IDLE_GPU_THRESHOLD", "0.05")))
JOB_IDLE_WARN_MINUTES = float(env("JOB_IDLE_WARN_MINUTES", "60"))
JOB_IDLE_STOP_MINUTES = float(env("JOB_IDLE_STOP_MINUTES", "60"))
# Teams' outgoing webhooks: private, loopback and link-local targets only where the platform allows them (an
# on-premises receiver), and how long one delivery may take.
WEBHOOK_ALLOW_PRIVATE_TARGETS = env_bool("WEBHOOK_ALLOW_PRIVATE_TARGETS", False)
WEBHOOK_TIMEOUT_SECONDS = float(env("WEBHOOK_TIMEOUT_SECONDS", "5"))
# Usage collection: how far back missed or failed hours are filled in, how long one Prometheus query may take,
# and the sampling step integrated over each hour (it must divide 3600).
BILLING_BACKFILL_DAYS = int(env("BILLING_BACKFILL_DAYS", "7"))
BILLING_PROMETHEUS_TIMEOUT = float(env("BILLING_PROMETHEUS_TIMEOUT", "30"))
BILLING_STEP_SECONDS = int(env("BILLING_STEP_SECONDS", "60"))
# How long one Prometheus query of a page (the usage explorer's GPU level) may take before the page says so.
BILLING_PAGE_TIMEOUT = float(env("BILLING_PAGE_TIMEOUT", "10"))

# Kubernetes: the field manager every server-side apply uses, and how long one call may take.
KUBE_FIELD_MANAGER = "gpu-portal"
KUBE_REQUEST_TIMEOUT = float(env("KUBE_REQUEST_TIMEOUT", "10"))
# Requests one process sends to one cluster at once while it reconciles (a controller's worker count): a few
# overlap the API server's work with the portal's without crowding the server.
KUBE_CONCURRENCY = int(env("KUBE_CONCURRENCY", "4"))
KUBECONFIG = env("KUBECONFIG")
# Team namespaces are "<prefix><slug>"; slugs are limited so the name always fits 63 characters.
NAMESPACE_PREFIX = env("NAMESPACE_PREFIX", "")
# Prometheus scrapes team pods from this namespace; the team NetworkPolicies let it in.
MONITORING_NAMESPACE = env("MONITORING_NAMESPACE", "monitoring")
RECONCILE_BACKOFF_BASE_SECONDS = float(env("RECONCILE_BACKOFF_BASE_SECONDS", "5"))
RECONCILE_BACKOFF_MAX_SECONDS = float(env("RECONCILE_BACKOFF_MAX_SECONDS", "600"))

# The API: personal access tokens for scripts (listed first, so a missing credential is a 401), the session for
# the browser (CSRF enforced on its writes); one error shape; cursor pages; a request budget per token.
API_THROTTLE_RATE = env("API_THROTTLE_RATE", "1200/min")
# /metrics (Prometheus): open by default, as a ServiceMonitor scrapes it inside the cluster; with METRICS_TOKEN set
# a scrape must send it as a bearer token.
METRICS_TOKEN = env("METRICS_TOKEN")
# How long the answer to a create sent with an Idempotency-Key is replayed to a retry with the same key.
IDEMPOTENCY_KEY_HOURS = int(env("IDEMPOTENCY_KEY_HOURS", "24"))
# The throttle counts in Redis (CACHE_URL; in production REDIS_URL unless set), shared by every web worker; without
# it, as in the demo and the tests, each process counts for itself.
CACHE_URL = env("CACHE_URL", REDIS_URL if PRODUCTION else "")
if CACHE_URL:
    # Short timeouts: a Redis that is away costs a request at most this, and the throttle then fails open.
    CACHES = {"default": {"BACKEND": "portal.cache.RedisCache", "LOCATION": CACHE_URL, "KEY_PREFIX": "gpu-portal",
                          "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}}}
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenants.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated",
                                   "tenants.authentication.TokenScopePermission"],
    "DEFAULT_THROTTLE_CLASSES": ["portal.api.TokenRateThrottle"],
    "DEFAULT_PAGINATION_CLASS": "portal.api.Pagination",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["portal.limits.LimitedJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "portal.schema.PortalAutoSchema",
    "EXCEPTION_HANDLER": "portal.api.exception_handler",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Portal API",
    "DESCRIPTION": "Quotas, jobs and usage of the GPU portal. Authenticate with `Authorization: Bearer gpp_…`: a "
                   "personal access token from the portal's Access tokens page (/tokens/).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "portal.api.error_responses_hook"],
    # One named enum per choice set where several fields share a name ("kind": a job's, a submitted job's, a hold's).
    "ENUM_NAME_OVERRIDES": {"JobStateEnum": "jobs.choices.JobState", "RequestStateEnum": "quotas.choices.RequestState",
                            "JobKindEnum": "jobs.choices.JobKind", "SubmittedKindEnum": "jobs.choices.SUBMITTED_KINDS",
                            "HoldKindEnum": "billing.choices.HoldKind"},
    # Swagger UI and Redoc are served from the portal's own static files, never from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Content-Security-Policy (django-csp): every script, style, font and image is the portal's own static file (htmx,
# plotly.js, Swagger UI and Redoc included), so nothing inline or from elsewhere runs. The API docs pages relax only
# style-src: Swagger UI and Redoc style their widgets with inline <style> elements (config/api_urls.py).
# style-src-attr allows exactly two style attribute values, by hash: plotly.js draws a heatmap as a small bitmap
# scaled up and keeps it sharp with an `image-rendering: ... pixelated` style attribute, after probing support with
# an empty one; refused, the heatmap is smoothed into a blur. Any other inline style attribute is still refused.
# The hashes follow plotly.js's text (package-lock.json); tests/test_csp.py fails if they drift.
PLOTLY_STYLE_ATTRIBUTE_HASHES = ["'sha256-AR/cKIZjWPcPmBUPDA6oti9XBiTbJvz0Cro2J1VzzS8='",  # the pixelated image
                                 "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"]  # the empty probe
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "style-src-attr": ["'unsafe-hashes'", *PLOTLY_STYLE_ATTRIBUTE_HASHES],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    # Kubelet and load-balancer probes speak plain HTTP inside the cluster; a redirect would fail them.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = int(env("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    SECURE_REFERRER_POLICY = "same-origin"
    X_FRAME_OPTIONS = "DENY"
