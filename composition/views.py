"""Process health endpoints for load balancers and Kubernetes probes (no login, no session), and the console's
health page for the platform team."""

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from portal import metrics
from portal.http import platform_admin_required

from .selectors import dependencies, reconcile_backlog


@never_cache
@require_GET
def healthz(request):
    """Alive: the process answers. Nothing else is checked, so a slow dependency never restarts the pod."""
    return JsonResponse({"status": "ok"})


def _database() -> tuple[bool, str]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means not ready, and we say which
        return False, str(exc)
    return True, ""


@never_cache
@require_GET
def readyz(request):
    """Ready: this pod can serve, which needs its database and nothing else. A GPU cluster or the broker that is
    away degrades some pages and delays reconcile, but every web pod would see the same outage: failing readiness
    for it would take the whole web tier out of service while it still serves. `?verbose` adds the broker and
    every cluster to the body (reported, never failing the probe)."""
    checks = {"database": _database()}
    ok = checks["database"][0]
    if "verbose" in request.GET and ok:
        checks.update(dependencies())
    degraded = any(not passed for passed, _ in checks.values())
    body = {"status": "unavailable" if not ok else "degraded" if degraded else "ok",
            "checks": {name: {"ok": passed, "detail": detail} for name, (passed, detail) in checks.items()}}
    return JsonResponse(body, status=200 if ok else 503)


@never_cache
@platform_admin_required
def console_health(request):
    """What `/readyz?verbose` and `/metrics` say, for a person: whether the broker and each cluster answer, how far
    reconcile and each cluster's watcher are behind, and how the workers' tasks ended."""
    checks = dependencies()
    stale_after = max(60.0, 3 * settings.WATCH_LEASE_SECONDS)
    clusters = [{"row": row, "ok": checks[f"cluster:{row.cluster.name}"][0],
                 "detail": checks[f"cluster:{row.cluster.name}"][1],
                 "stale": row.watcher_known and (row.watcher_lag is None or row.watcher_lag > stale_after)}
                for row in reconcile_backlog() if f"cluster:{row.cluster.name}" in checks]
    outcomes = metrics.task_outcomes()
    failures = sorted(((task, count) for (task, outcome), count in (outcomes or {}).items()
                       if outcome != "succeeded" and count), key=lambda pair: -pair[1])
    broker_ok, broker_detail = checks["broker"]
    return render(request, "composition/health.html", {
        "broker_ok": broker_ok, "broker_detail": broker_detail, "clusters": clusters, "stale_after": stale_after,
        "outcomes_known": outcomes is not None, "failures": failures,
        "unhealthy": (not broker_ok) + sum(1 for c in clusters if not c["ok"] or c["stale"] or c["row"].retrying)})
