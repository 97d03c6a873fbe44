from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from composition import views
from composition.metrics import metrics_view

handler500 = "portal.api.server_error"

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("console/health/", views.console_health, name="console-health"),
    path("login/", auth_views.LoginView.as_view(extra_context={"sso_enabled": settings.OIDC_ENABLED}), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("django-admin/", admin.site.urls),
    path("api/", include("config.api_urls")),
    path("", include("quotas.urls")),
    path("", include("jobs.urls")),
    path("", include("workspaces.urls")),
    path("", include("billing.urls")),
    path("", include("tenants.urls")),
]
if settings.OIDC_ENABLED:
    urlpatterns.insert(0, path("oidc/", include("mozilla_django_oidc.urls")))
