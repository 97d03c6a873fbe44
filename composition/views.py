"""Process health endpoints for load balancers and Kubernetes probes (no login, no session)."""

from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from tenants.selectors import active_clusters, cluster_reachable


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


def _broker() -> tuple[bool, str]:
    if not settings.REDIS_URL:
        return True, "in-process tasks"
    import redis

    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        return False, str(exc)
    return True, ""


def dependencies() -> dict[str, tuple[bool, str]]:
    """The broker and every active cluster, checked at once: what the console and `/readyz?verbose` report and the
    metrics export. None of them decides whether this pod can serve."""
    checks = {"broker": _broker()}
    clusters = list(active_clusters())
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(clusters)))) as pool:
        for cluster, result in zip(clusters, pool.map(cluster_reachable, clusters), strict=True):
            checks[f"cluster:{cluster.name}"] = result
    return checks


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
