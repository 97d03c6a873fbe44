"""The scenarios of the controllers lane, written once and run twice: on the real Kueue and Volcano
(tests/controllers/test_<scheduler>.py) and on the sandbox's simulator (`sandbox_world`), so the two can be
compared on what matters to the portal (`observe`): the order jobs were admitted in, which were preempted, the
reasons on the scheduler's own records, and the sentences the portal shows for each job.

A scenario takes a world (`conftest.build_real_world` or `sandbox_world`: the same rows, only the cluster differs)
and returns the portal's jobs by name once the scheduler has settled; every wait polls the status sync, so both
run at the controllers' own pace.
"""

from __future__ import annotations

import re

from jobs import outcome, pods, selectors
from jobs.choices import JobState, WaitReason
from jobs.placement import placement_sentence
from jobs.waits import wait_reason
from portal import kube
from portal.upstream import KUEUE_API, VOLCANO_SCHEDULING_API
from tests.controllers.conftest import add_team, sync, sync_until
from tests.jobs.test_simulated import submit

STARTED = (JobState.ADMITTED, JobState.RUNNING)


# --- Kueue and Volcano alike ---------------------------------------------------------------------------------


def queued_behind(world, run_on_commit) -> dict:
    """Quota 8 + 0: the first 8-GPU job is admitted and runs; the second waits for quota."""
    first = submit(world, run_on_commit, name="first", workers=1, gpus_per_worker=8, kind="batch")
    sync_until(world, lambda r: r[first.pk].state == JobState.RUNNING, what="first running")
    second = submit(world, run_on_commit, name="second", workers=1, gpus_per_worker=8, kind="batch")
    sync_until(world, lambda r: r[second.pk].state == JobState.QUEUED and r[second.pk].state_message,
               what="second queued with the scheduler's reason")
    return {"first": first, "second": second}


# --- Kueue ---------------------------------------------------------------------------------------------------


def priority_preemption(world, run_on_commit) -> dict:
    """Quota 8 + 0: an urgent job preempts the team's own standard job (withinClusterQueue LowerPriority)."""
    low = submit(world, run_on_commit, name="cheap", workers=1, gpus_per_worker=8, kind="batch",
                 priority_tier=world["tiers"]["standard"])
    sync_until(world, lambda r: r[low.pk].state == JobState.RUNNING, what="cheap running")
    high = submit(world, run_on_commit, name="deadline", workers=1, gpus_per_worker=8, kind="batch",
                  priority_tier=world["tiers"]["urgent"])
    with run_on_commit():
        sync_until(world, lambda r: r[low.pk].state == JobState.PREEMPTED and r[high.pk].state in STARTED,
                   what="cheap preempted, deadline admitted")
    return {"cheap": low, "deadline": high}


def _borrowing(world, run_on_commit):
    """Team vision (8 + 0) beside nlp; nlp's `base` runs on its guarantee, then `burst` beyond it."""
    vision = add_team(world, "vision", guaranteed=8, burst=0)
    mine = submit(world, run_on_commit, name="base", workers=1, gpus_per_worker=8, kind="batch")
    sync_until(world, lambda r: r[mine.pk].state == JobState.RUNNING, what="base running")
    borrowing = submit(world, run_on_commit, name="burst", workers=1, gpus_per_worker=8, kind="batch")
    sync_until(world, lambda r: r[borrowing.pk].state == JobState.RUNNING, what="burst running beyond the guarantee")
    return vision, mine, borrowing


def borrow_and_reclaim(world, run_on_commit) -> dict:
    """nlp (8 + 8) borrows vision's idle 8 GPUs in the cohort; when vision (8 + 0) submits, Kueue reclaims them
    (reclaimWithinCohort Any) by preempting the borrowing job, not nlp's own."""
    vision, mine, borrowing = _borrowing(world, run_on_commit)
    theirs = submit(vision, run_on_commit, name="own", workers=1, gpus_per_worker=8, kind="batch")
    with run_on_commit():
        sync_until(world, lambda r: r[borrowing.pk].state == JobState.PREEMPTED and r[theirs.pk].state in STARTED,
                   what="burst reclaimed, own admitted")
    return {"base": mine, "burst": borrowing, "own": theirs}


def pods_never_ready(world, run_on_commit) -> dict:
    """Quota for 8 GPUs but no node to run on: Kueue admits the job, its pod never becomes ready, and once
    waitForPodsReady's timeout has passed (on by default since v0.19) Kueue evicts it, releases its quota and queues
    it again after a backoff."""
    stuck = submit(world, run_on_commit, name="stuck", workers=1, gpus_per_worker=8, kind="batch")
    sync_until(world, lambda r: r[stuck.pk].state == JobState.ADMITTED, what="stuck admitted")
    sync_until(world, lambda r: r[stuck.pk].state == JobState.QUEUED and r[stuck.pk].state_message,
               what="stuck evicted by the PodsReady timeout", timeout=180)
    return {"stuck": stuck}


# --- Volcano -------------------------------------------------------------------------------------------------


def gang_does_not_fit(world, run_on_commit) -> dict:
    """Quota 16 on two 8-GPU nodes: a 4-GPU job runs on one; a 2 x 6-GPU gang (minAvailable 2) passes the queue's
    quota and the cluster's overcommit check (enqueue), but only one of its pods finds room, so none starts."""
    small = submit(world, run_on_commit, name="small", workers=1, gpus_per_worker=4, kind="batch")
    sync_until(world, lambda r: r[small.pk].state == JobState.RUNNING, what="small running")
    gang = submit(world, run_on_commit, name="gang", workers=2, gpus_per_worker=6, kind="pytorch")
    sync_until(world, lambda r: r[gang.pk].state == JobState.QUEUED and "gang" in r[gang.pk].state_message,
               what="gang waiting for room on the nodes")
    return {"small": small, "gang": gang}


def reclaimed_from_the_borrower(world, run_on_commit) -> tuple[dict, list[dict]]:
    """nlp (8 + 8) runs `base` on its guarantee and `burst` beyond it; vision (8 + 0) then submits `own` when no
    node has room: Volcano's reclaim action evicts a pod of nlp's queue, which is above its deserved share, and
    `own` runs. Returns the jobs, and what the portal showed for `own` each time it saw it waiting before then."""
    vision, mine, borrowing = _borrowing(world, run_on_commit)
    theirs = submit(vision, run_on_commit, name="own", workers=1, gpus_per_worker=8, kind="batch")
    waited: list[dict] = []

    def reclaimed(rows) -> bool:
        own = rows[theirs.pk]
        if own.state == JobState.QUEUED and own.state_message:
            seen = {"message": own.state_message, "why_waiting": selectors.why_waiting(job=own)}
            if seen not in waited:
                waited.append(seen)
        return own.state in STARTED and any(rows[j.pk].state == JobState.PREEMPTED for j in (mine, borrowing))

    with run_on_commit():
        sync_until(world, reclaimed, what="one of nlp's jobs reclaimed, own started")
    return {"base": mine, "burst": borrowing, "own": theirs}, waited


# --- topology-required placement: Kueue TAS, Volcano HyperNodes ----------------------------------------------

LEVELS = [{"name": "block", "node_label": "example.com/block"}, {"name": "rack", "node_label": "example.com/rack"},
          {"name": "host", "node_label": "kubernetes.io/hostname"}]
# Four 8-GPU nodes: two in rack r1, one in r2 and one in r3, all in block b1. Two 16-GPU jobs fit the quota and
# the cluster (Volcano's overcommit plugin enqueues up to 1.2 x its 32 GPUs), but only one fits a rack.
RACKS = {0: {"example.com/block": "b1", "example.com/rack": "r1"},
         1: {"example.com/block": "b1", "example.com/rack": "r1"},
         2: {"example.com/block": "b1", "example.com/rack": "r2"},
         3: {"example.com/block": "b1", "example.com/rack": "r3"}}


def rack_bound(world, run_on_commit, *, running: bool = False) -> dict:
    """Quota 32 on four nodes (racks r1: 2, r2: 1, r3: 1): a 2 x 8-GPU job required to keep within one rack lands
    in r1 (`running`: and its pods run there); the next one, the same, has quota and free GPUs but no rack with room
    for both workers, so it waits for placement."""
    ring = submit(world, run_on_commit, name="ring", workers=2, gpus_per_worker=8, kind="batch",
                  topology_level="rack")
    sync_until(world, lambda r: (r[ring.pk].state == JobState.RUNNING if running else r[ring.pk].state in STARTED)
               and r[ring.pk].placement.get("domains"), what="ring placed in a rack")
    second = submit(world, run_on_commit, name="ring-2", workers=2, gpus_per_worker=8, kind="batch",
                    topology_level="rack")
    sync_until(world, lambda r: r[second.pk].state == JobState.QUEUED
               and wait_reason(r[second.pk].state, r[second.pk].state_message) == WaitReason.PLACEMENT,
               what="ring-2 waiting for a rack with room")
    return {"ring": ring, "ring-2": second}


def pod_counts(piece: dict) -> int:
    """The pods one slice of a topologyAssignment holds (v1beta2: the same count in every domain, or one each)."""
    counts = piece.get("podCounts") or {}
    if "universal" in counts:
        return counts["universal"] * piece.get("domainCount", 1)
    return sum(counts.get("individual") or [])


# --- Dynamic Resource Allocation: a DRA flavor's devices claimed by each worker ------------------------------


def devices_claimed(world, run_on_commit) -> dict:
    """Quota 8 + 0 on the DRA flavor, two nodes of 8 devices: a 2 x 4-device job runs, each worker's claim
    allocated 4 devices from a node's slice; then a 1 x 4-device job, over the quota. Returns once the second has
    settled: waiting with the scheduler's words, or running where nothing counts the devices against the queue."""
    first = submit(world, run_on_commit, name="first", workers=2, gpus_per_worker=4, kind="batch")
    sync_until(world, lambda r: r[first.pk].state == JobState.RUNNING, what="first running")
    second = submit(world, run_on_commit, name="second", workers=1, gpus_per_worker=4, kind="batch")
    sync_until(world, lambda r: r[second.pk].state == JobState.RUNNING
               or (r[second.pk].state == JobState.QUEUED and r[second.pk].state_message),
               what="second running or queued with the scheduler's reason")
    return {"first": first, "second": second}


def allocated_devices(world, job) -> list[tuple[str, str]]:
    """The (pool, device) pairs allocated to the job's ResourceClaims (one claim per worker pod, from the job's
    template), as the scheduler's DRA plugin wrote them."""
    client = kube.client_for_cluster(world["cluster"])
    claims = client.list("resource.k8s.io/v1", "ResourceClaim", namespace=job.team.slug,
                         label_selector=f"gpu-portal.io/job={job.pk}")
    return sorted((result["pool"], result["device"]) for claim in claims
                  for result in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                      "results") or [])


def claims_on_their_pods_nodes(world, job) -> bool:
    """Every pod of the job runs on the node whose slice (pool) its claim's devices came from."""
    client = kube.client_for_cluster(world["cluster"])
    namespace, selector = job.team.slug, f"gpu-portal.io/job={job.pk}"
    claims = {c["metadata"]["name"]: c for c in client.list("resource.k8s.io/v1", "ResourceClaim",
                                                            namespace=namespace, label_selector=selector)}
    found = client.list("v1", "Pod", namespace=namespace, label_selector=selector)
    for pod in found:
        node = (pod.get("spec") or {}).get("nodeName")
        [status] = (pod.get("status") or {}).get("resourceClaimStatuses") or [{}]
        claim = claims.get(status.get("resourceClaimName", ""), {})
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        if not node or not results or {r["pool"] for r in results} != {node}:
            return False
    return bool(found)


# --- KubeRay, under either scheduler --------------------------------------------------------------------------


def ray_job_waits_for_its_submitter(world, run_on_commit) -> dict:
    """Quota 16 GPUs and 16 CPUs: a batch job holds 8 GPUs and 8 CPUs; a RayJob whose head (4 CPUs) and one 8-GPU
    worker (4 CPUs) would fill the rest exactly still waits, because KubeRay's submitter Job (500m CPU) is counted
    too: by Kueue as a pod set of its own, by KubeRay's Volcano plugin in the PodGroup's minResources. When the
    batch job is cancelled, the RayJob is admitted, KubeRay makes its RayCluster and its pods run."""

    first = submit(world, run_on_commit, name="first", workers=1, gpus_per_worker=8, cpu_per_worker=8, kind="batch")
    sync_until(world, lambda r: r[first.pk].state == JobState.RUNNING, what="first running")
    tune = submit(world, run_on_commit, name="tune", kind="ray", workers=1, gpus_per_worker=8, cpu_per_worker=4,
                  command=["python", "tune.py"])
    sync_until(world, lambda r: r[tune.pk].state == JobState.QUEUED and pods.short_of(r[tune.pk].state_message),
               what="tune waiting for CPU, in the scheduler's words")
    return {"first": first, "tune": tune}


def ray_job_starts_when_the_cpus_are_free(world, run_on_commit, jobs) -> dict:
    from jobs import services

    with run_on_commit():
        services.job_cancel(actor=world["member"], job=jobs["first"])
    tune = jobs["tune"]
    sync_until(world, lambda r: r[tune.pk].state in STARTED and _ray_pods_running(world, r[tune.pk]),
               what="tune admitted, its Ray pods running")
    return {"tune": tune}


def _ray_pods_running(world, job) -> bool:
    client = kube.client_for_cluster(world["cluster"])
    pods = client.list("v1", "Pod", namespace=job.team.slug, label_selector=f"gpu-portal.io/job={job.pk}")
    return len(pods) >= 2 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


# --- what is compared ----------------------------------------------------------------------------------------

_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _records(world) -> dict[str, dict]:
    """The scheduler's record of each job (Kueue's Workload, Volcano's PodGroup) by the job object's name."""
    client = kube.client_for_cluster(world["cluster"])
    kind = (KUEUE_API, "Workload") if world["cluster"].scheduler == "kueue" else (VOLCANO_SCHEDULING_API, "PodGroup")
    records = {}
    for record in client.list(*kind):
        for ref in record["metadata"].get("ownerReferences") or []:
            records[ref["name"]] = record
    return records


def observe(world, jobs: dict) -> dict:
    """What the portal shows for each job and what the scheduler wrote of it, with the names and UIDs that
    differ from run to run replaced by placeholders."""
    rows = sync(world)
    records = _records(world)
    names = {}
    for name, job in jobs.items():
        row = rows[job.pk]
        record = records.get(row.object_name, {})
        names[record.get("metadata", {}).get("name", "") or f"<none:{name}>"] = f"<record:{name}>"
        names[row.object_name] = f"<job:{name}>"

    def plain(text: str) -> str:
        for actual, placeholder in names.items():
            text = text.replace(actual, placeholder)
        return _UID.sub("<uid>", text)

    seen, admitted = {}, []
    for name, job in sorted(jobs.items(), key=lambda item: (rows[item[1].pk].admitted_at is None,
                                                            rows[item[1].pk].admitted_at, item[0])):
        row = rows[job.pk]
        if row.admitted_at is not None:
            admitted.append(name)
        record = records.get(row.object_name, {})
        status = record.get("status") or {}
        seen[name] = {
            "state": row.state,
            "message": plain(row.state_message),
            "why_waiting": plain(selectors.why_waiting(job=row)),
            "outcome": plain(outcome.explain(row.state, row.state_message)),
            "placement": placement_sentence(row, set()),
            "conditions": {c["type"]: f"{c['status']} {c.get('reason', '')}".strip()
                           for c in status.get("conditions") or []},
            **({"phase": status["phase"]} if status.get("phase") else {}),
        }
    return {"admitted": admitted, "preempted": sorted(n for n, s in seen.items() if s["state"] == JobState.PREEMPTED),
            "jobs": seen}
