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


@never_cache
@require_GET
def readyz(request):
    """Ready: the database answers, the broker (when configured) answers, and each active cluster is reachable."""
    checks = {"database": _database(), "broker": _broker()}
    clusters = list(active_clusters()) if checks["database"][0] else []
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(clusters)))) as pool:
        for cluster, result in zip(clusters, pool.map(cluster_reachable, clusters), strict=True):
            checks[f"cluster:{cluster.name}"] = result
    ok = all(passed for passed, _ in checks.values())
    body = {"status": "ok" if ok else "unavailable",
            "checks": {name: {"ok": passed, "detail": detail} for name, (passed, detail) in checks.items()}}
    return JsonResponse(body, status=200 if ok else 503)
