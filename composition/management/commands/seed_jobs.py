"""Demo jobs in every state (pending, queued, admitted, running, succeeded, failed, cancelled, preempted) on both
demo clusters, submitted through the same services as the forms, run by the simulating sandboxes.

Each demo job steers its simulation through the sandbox's `/_sandbox/jobs` endpoint (how long it starts and runs,
how it ends); preemption is real: on Kueue a higher tier arrives while a preemptible job holds the team's quota;
on Volcano, whose default configuration preempts nothing, the demo cluster's scheduler is configured for
hierarchical queues with the `reclaim` action, and a team within its deserved share reclaims from one above it.
A pending job is one whose first apply met a (one-shot) API server error and waits for its retry. Idempotent: a demo
job that exists already is left alone, whatever state it has reached since (a demo kept for an hour has moved on).
A job that does not reach its state in time is reported and the demo goes on: the portal starts either way.
"""

import json
import time
import urllib.error
import urllib.request

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from backends import backend_for
from jobs import services
from jobs import sync as job_sync
from jobs.models import Job
from tenants.choices import Sharing
from tenants.models import Cluster, GpuFlavor, PriorityTier, Team

HOURS = 3600 * 8
QUICK = {"duration": 1, "startup": 0}
LONG = {"duration": HOURS, "startup": 0}
STARTING = {"duration": HOURS, "startup": HOURS}

# (cluster, team, user, name, kind, flavor, workers, GPUs per worker, tier, sandbox plan, state to wait for).
# The order matters: a preemption needs its victim running first. `fail` and `cancel` are ways to end.
JOBS = [
    ("gpu-east", "nlp", "erin", "tokenizer-eval", "batch", "h100", 1, 1, "standard", QUICK, "succeeded"),
    ("gpu-east", "nlp", "erin", "ablation-lr", "pytorch", "h100", 2, 1, "standard", {**QUICK, "outcome": "fail"},
     "failed"),
    ("gpu-east", "nlp", "dave", "llama-finetune", "pytorch", "h100", 2, 8, "standard", LONG, "running"),
    ("gpu-east", "nlp", "erin", "ray-sweep", "ray", "h100", 1, 4, "standard", STARTING, "admitted"),
    ("gpu-east", "nlp", "erin", "pretrain-7b", "pytorch", "h100", 2, 8, "standard", LONG, "queued"),
    ("gpu-east", "nlp", "erin", "debug-shell", "batch", "h100", 1, 1, "standard", LONG, "cancel"),
    ("gpu-east", "ml-research", "bob", "nightly-benchmark", "batch", "h100", 2, 8, "preemptible", LONG, "running"),
    ("gpu-east", "ml-research", "alice", "paper-deadline", "pytorch", "h100", 2, 8, "urgent", LONG, "running"),
    ("gpu-east", "vision", "frank", "vit-distill", "pytorch", "a100-mig-3g", 2, 2, "standard", LONG, "pending"),
    ("gpu-west", "vision", "frank", "clip-eval", "batch", "l40s", 1, 1, "standard", QUICK, "succeeded"),
    ("gpu-west", "vision", "frank", "detector-train", "pytorch", "l40s", 2, 2, "standard",
     {**QUICK, "outcome": "fail"}, "failed"),
    ("gpu-west", "ml-research", "alice", "diffusion-train", "pytorch", "a100", 2, 4, "standard", LONG, "running"),
    ("gpu-west", "vision", "frank", "seg-sweep", "ray", "l40s", 1, 2, "standard", STARTING, "admitted"),
    ("gpu-west", "recsys", "ivan", "embeddings-a", "batch", "a100", 1, 8, "standard", LONG, "running"),
    ("gpu-west", "ml-research", "bob", "scratch", "batch", "a100", 1, 1, "standard", LONG, "cancel"),
    ("gpu-west", "ml-research", "bob", "hparam-search", "batch", "a100", 1, 8, "preemptible", LONG, "running"),
    # Volcano: the cluster is full and ml-research is above its deserved share; vision, within its own, reclaims.
    ("gpu-west", "vision", "frank", "detector-retrain", "batch", "l40s", 1, 4, "standard", LONG, "running"),
    # Volcano: ml-research is at its deserved share, so it may not reclaim, and its gang cannot be placed.
    ("gpu-west", "ml-research", "alice", "eval-urgent", "batch", "a100", 1, 8, "urgent", LONG, "queued"),
    # The A100 nodes are full and ml-research runs above its deserved share: Volcano's reclaim action evicts its
    # preemptible hparam-search so recsys gets the node its share promises (actions/reclaim, capacity plugin).
    ("gpu-west", "recsys", "ivan", "embeddings-b", "batch", "a100", 1, 8, "standard", LONG, "running"),
    ("gpu-west", "vision", "frank", "yolo-export", "batch", "l40s", 1, 1, "standard", LONG, "pending"),
    ("gpu-west", "recsys", "heidi", "ranker-untrusted", "batch", "a100", 1, 1, "standard", LONG, "rejected"),
    # Shared GPUs and DRA devices, one running job on each (skipped on a sandbox whose DRA driver publishes nothing).
    ("gpu-east", "ml-research", "alice", "dra-finetune", "pytorch", "h100-dra", 2, 2, "standard", LONG, "running"),
    ("gpu-east", "nlp", "erin", "mps-inference", "batch", "h100-mps", 4, 1, "standard", LONG, "running"),
    ("gpu-west", "vision", "frank", "dra-eval", "batch", "h100-dra", 1, 2, "standard", LONG, "running"),
    ("gpu-west", "vision", "frank", "notebook-shared", "batch", "l40s-shared", 2, 1, "standard", LONG, "running"),
    # Placement: nlp's reserved H100s are taken, so a job that may run on spot lands on the spot flavor; a gang kept
    # within one rack; on Volcano the same options (spot tolerated, workers within one rack HyperNode).
    ("gpu-east", "nlp", "erin", "spot-finetune", "pytorch", "h100", 1, 8, "standard", LONG, "running",
     {"spot_allowed": True}),
    ("gpu-east", "ml-research", "alice", "allreduce-bench", "pytorch", "h100", 2, 1, "standard", LONG, "running",
     {"topology_level": "rack", "topology_mode": "required"}),
    ("gpu-west", "vision", "frank", "spot-eval", "batch", "l40s", 1, 1, "standard", LONG, "running",
     {"spot_allowed": True}),
    ("gpu-west", "vision", "frank", "ring-allreduce", "pytorch", "l40s", 2, 1, "standard", LONG, "running",
     {"topology_level": "rack", "topology_mode": "required"}),
]
# The API server refuses the rejected demo job for good (a 4xx is recorded and shown, not retried).
REJECTION = {"status": 422, "reason": "Invalid", "message": 'admission webhook "images.policy.example.com" denied '
             "the request: registry.example.com/recsys is not an allowed registry for namespace recsys"}
# Where the demo ends up once everything above has happened.
FINAL = {"nightly-benchmark": "preempted", "hparam-search": "preempted", "debug-shell": "cancelled",
         "scratch": "cancelled"}
COMMANDS = {"pytorch": ["torchrun", "train.py"], "ray": ["python", "sweep.py"], "batch": ["python", "main.py"]}


def _call(url: str, method: str = "GET", body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        raise CommandError(f"{method} {url}: {exc.code} {detail}") from exc
    except OSError as exc:
        raise CommandError(f"{method} {url}: {exc}") from exc


class Command(BaseCommand):
    help = "Submit the demo jobs, one in every state on each demo cluster (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--timeout", type=float, default=60, help="seconds to wait for each job's state")

    def handle(self, *args, timeout, **options):
        clusters = {}
        for cluster in Cluster.objects.filter(name__in={row[0] for row in JOBS}, connection="sandbox"):
            try:
                _call(f"{cluster.server}/_sandbox/jobs")
            except CommandError as exc:  # e.g. a sandbox started without --simulate: the demo works, jobs wait
                self.stderr.write(f"No demo jobs on {cluster.name}: {exc}")
            else:
                clusters[cluster.name] = cluster
                self._configure_scheduler(cluster)
        # Each cluster's jobs in their order, the two clusters side by side; a job whose end nothing after it
        # depends on (a quick one that succeeds or fails) is waited for at the end of its cluster's turn.
        runs = [self._cluster_jobs(cluster, [row for row in JOBS if row[0] == name], timeout=timeout)
                for name, cluster in clusters.items()]
        while runs:
            for run in list(runs):
                try:
                    more = next(run, None)
                except CommandError as exc:  # one job late or refused: say so, keep the rest of the demo
                    self.stderr.write(f"Demo jobs: {exc}")
                    more = None
                if more is None:
                    runs.remove(run)
            time.sleep(0.2)

    def _cluster_jobs(self, cluster, rows, *, timeout: float):
        """Submit one cluster's demo jobs in order, yielding True whenever it waits for the simulation."""
        users = get_user_model().objects
        deferred, submitted = [], set()
        for row in rows:
            cluster_name, slug, username, name, kind, flavor, workers, gpus, tier, plan, wait_for = row[:11]
            placement = row[11] if len(row) > 11 else {}
            team = Team.objects.get(slug=slug)
            if Job.objects.filter(team=team, cluster=cluster, name=name).exists():
                continue
            dra = GpuFlavor.objects.get(cluster=cluster, name=flavor).sharing == Sharing.DRA
            if dra and not _call(f"{cluster.server}/apis/resource.k8s.io/v1/resourceslices").get("items"):
                self.stderr.write(f"No DRA demo job on {cluster.name}: no ResourceSlice publishes devices "
                                  "(start the sandbox with --dra-nodes)")
                continue
            if wait_for == "pending":  # the first apply of this team's job fails once; the retry comes later
                _call(f"{cluster.server}/_sandbox/faults", "POST", {
                    "verb": "apply", "resource": "jobs", "namespace": team.namespace, "status": 503,
                    "reason": "ServiceUnavailable", "message": "the API server is restarting", "count": 1})
            if wait_for == "rejected":
                _call(f"{cluster.server}/_sandbox/faults", "POST", {
                    "verb": "apply", "resource": "jobs", "namespace": team.namespace, "count": 1, **REJECTION})
            job = services.job_submit(
                actor=users.get(username=username), team=team,
                flavor=GpuFlavor.objects.get(cluster=cluster, name=flavor), kind=kind, name=name,
                image=f"registry.example.com/{slug}/{kind}:1.0", command=COMMANDS[kind], workers=workers,
                gpus_per_worker=gpus, cpu_per_worker=4, memory_gib_per_worker=32,
                priority_tier=PriorityTier.objects.get(name=tier), notify=False, **placement)
            job.refresh_from_db()
            submitted.add(job.pk)
            if wait_for not in ("pending", "rejected"):
                _call(f"{cluster.server}/_sandbox/jobs/{team.namespace}/{job.object_name}", "POST", plan)
            if wait_for == "cancel":
                yield from self._wait(cluster, job, "queued", "running", timeout=timeout)
                services.job_cancel(actor=job.submitted_by, job=job)
                wait_for = "cancelled"
            if plan["duration"] == QUICK["duration"]:
                deferred.append(job)
                continue
            if wait_for == "rejected":
                yield from self._wait_rejected(cluster, job, timeout=timeout)
            else:
                yield from self._wait(cluster, job, wait_for, timeout=timeout)
            self.stdout.write(f"  {cluster_name:<9} {slug}/{name}: {wait_for}")
        for job in deferred:
            yield from self._wait(cluster, job, "succeeded", "failed", timeout=timeout)
            self.stdout.write(f"  {cluster.name:<9} {job.team.slug}/{job.name}: {job.state}")
        for name, state in FINAL.items():  # only what this run submitted: a kept job may have ended otherwise since
            for job in Job.objects.filter(name=name, cluster=cluster, pk__in=submitted):
                yield from self._wait(cluster, job, state, timeout=timeout)

    def _wait_rejected(self, cluster, job: Job, *, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            job.refresh_from_db()
            if job.sync_state == "rejected":
                return
            if time.monotonic() > deadline:
                raise CommandError(f"{cluster.name} {job}: not rejected after {timeout:g} s ({job.sync_message})")
            job_sync.job_status_sync(cluster=cluster)
            yield True

    def _configure_scheduler(self, cluster) -> None:
        """What the cluster's scheduler must be configured with for the portal's queues (`Backend.scheduler_setup`:
        Volcano's capacity plugin and reclaim action). Left alone when it exists."""
        for obj in backend_for(cluster).scheduler_setup():
            namespace = obj["metadata"].get("namespace")
            path = f"/api/v1/namespaces/{namespace}/configmaps" if namespace else "/api/v1/namespaces"
            try:
                _call(f"{cluster.server}{path}", "POST", obj)
            except CommandError as exc:
                if ": 409 " not in str(exc):
                    raise

    def _wait(self, cluster, job: Job, *states: str, timeout: float):
        """Sync the cluster's jobs until this one is in one of `states` (the simulators tick on their own),
        yielding between looks."""
        deadline = time.monotonic() + timeout
        while True:
            job_sync.job_status_sync(cluster=cluster)
            job.refresh_from_db()
            if job.state in states:
                return
            if time.monotonic() > deadline:
                raise CommandError(f"{cluster.name} {job}: still {job.state} after {timeout:g} s, expected "
                                   f"{' or '.join(states)} ({job.state_message or job.sync_message})")
            yield True
