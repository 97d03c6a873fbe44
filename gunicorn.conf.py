"""gunicorn's configuration for the portal's web tier (gunicorn reads ./gunicorn.conf.py; the image, compose and the
kustomize Deployment name it with `-c`).

Worker model: threaded workers (gthread). Measured on two cores with PostgreSQL, Redis and the load generator on
the same machine (bench/RESULTS.md, "Web tier under load"), both models saturate the CPU at about 190 requests/s,
and gthread has the lower tails: p99 0.73 s against 0.84 s at 50 users, 1.76 s against 2.05 s at 200, no 5xx
either way. What decides it is the waiting the bench does not have: a page that reads a cluster's API server (pods
and logs, live objects) or a slow database holds one thread here, where it would hold a whole process.

Sizing: WEB_WORKERS processes (about one per core the pod is given: CPU-bound rendering scales with processes),
WEB_THREADS threads each (the requests one process serves at once). Each thread keeps its own database connection
(DATABASE_CONN_MAX_AGE), so PostgreSQL needs max_connections ≥ pods × WEB_WORKERS × WEB_THREADS plus the workers'
and watchers'.
"""

import os
import tempfile

from prometheus_client import multiprocess

bind = os.environ.get("WEB_BIND", "0.0.0.0:8000")
worker_class = "gthread"
workers = int(os.environ.get("WEB_WORKERS", "2"))
threads = int(os.environ.get("WEB_THREADS", "8"))
# A request that takes longer than this is killed with its worker: longer than KUBE_REQUEST_TIMEOUT and the
# database's, so those fail first and are answered.
timeout = int(os.environ.get("WEB_TIMEOUT", "60"))
graceful_timeout = 30
keepalive = 5
# Recycle a process now and then, with jitter so they do not all restart at once.
max_requests = int(os.environ.get("WEB_MAX_REQUESTS", "5000"))
max_requests_jitter = max_requests // 10
# The heartbeat files live in memory-backed /tmp (the containers' root filesystem is read-only).
worker_tmp_dir = os.environ.get("WEB_WORKER_TMP_DIR", "/tmp")
accesslog = os.environ.get("WEB_ACCESS_LOG", "-") or None  # empty: no access log

# /metrics adds up every worker's counters from files here (prometheus-client's multiprocess mode); set before the
# workers import the portal.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="gpu-portal-metrics-"))


def child_exit(server, worker):
    multiprocess.mark_process_dead(worker.pid)
