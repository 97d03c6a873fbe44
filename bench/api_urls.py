"""Bench-only URL conf: the portal's URLs plus the floor the job list API is measured against."""

import json

from django.db import connection
from django.http import HttpResponse
from django.urls import include, path

FLOOR_SQL = """
SELECT j.id, j.name, j.kind, j.state, j.state_message, j.image, j.workers, j.gpus_per_worker, t.slug, c.name, f.name,
       p.name, u.username, j.submitted_at, j.admitted_at, j.started_at, j.finished_at, j.estimate
FROM jobs_job j
JOIN tenants_team t ON t.id = j.team_id
JOIN tenants_cluster c ON c.id = j.cluster_id
JOIN tenants_gpuflavor f ON f.id = j.flavor_id
JOIN tenants_prioritytier p ON p.id = j.priority_tier_id
JOIN auth_user u ON u.id = j.submitted_by_id
WHERE j.team_id = %s
ORDER BY j.submitted_at DESC, j.id DESC
LIMIT 50
"""


def _iso(value):
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def floor_jobs(request, team_id):
    """The least a job list can cost: one raw query, the same fields, json.dumps; no auth, no framework."""
    with connection.cursor() as cursor:
        cursor.execute(FLOOR_SQL, [team_id])
        rows = cursor.fetchall()
    results = [{"id": r[0], "team": r[8], "cluster": r[9], "flavor": r[10], "kind": r[2], "name": r[1],
                "image": r[5], "state": r[3], "state_message": r[4], "workers": r[6], "gpus_per_worker": r[7],
                "gpus": r[6] * r[7], "priority": r[11], "submitted_by": r[12], "submitted_at": _iso(r[13]),
                "admitted_at": _iso(r[14]), "started_at": _iso(r[15]), "finished_at": _iso(r[16]),
                "estimate": r[17]}
               for r in rows]
    return HttpResponse(json.dumps({"results": results}), content_type="application/json")


urlpatterns = [
    path("floor/jobs/<int:team_id>/", floor_jobs),
    path("", include("config.urls")),
]
