"""Kueue v0.19's admission checks (kubernetes-sigs/kueue): a ClusterQueue lists AdmissionChecks
(`spec.admissionChecksStrategy.admissionChecks`, v1beta2); each check's controller keeps it Active, and a queue that
lists a check missing or not Active is inactive (pkg/cache/scheduler/clusterqueue.go). The workload controller
gives each Workload of such a queue one `status.admissionChecks` entry per check, Pending at first
(pkg/controller/core/workload_controller.go syncAdmissionCheckConditions; sorted by name, entries of checks no
longer listed dropped). A workload that gets quota keeps it while a check is not Ready, and is admitted once every
check is Ready (pkg/workload/admissionchecks.go SyncAdmittedCondition). A check in Retry evicts it (reason
AdmissionCheck): the reservation is released and every check goes back to Pending, counting the retry
(pkg/workload/evict/evict.go resetChecksOnEviction); Rejected deactivates it (spec.active false; reconcile-
CheckBasedEviction, then the Deactivated eviction).

Checks that name `onFlavors` are taken, as Kueue takes them before a workload has an admission, to apply only when
they cover every flavor of the queue; the sandbox treats every listed check as applying to every workload.
"""

from __future__ import annotations

from .model import KUEUE, condition, iso, set_conditions

CHECK_KIND = "AdmissionCheck"
EVICTED_BY_CHECK = "AdmissionCheck"
DEACTIVATED = "Deactivated"


def listed(spec: dict) -> list[str]:
    return sorted({c.get("name", "") for c in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or ()
                   if c.get("name")})


def inactive(objects, names: list[str]) -> list[str]:
    """The listed checks that are missing or whose controller has not marked them Active."""
    found = {}
    for check in objects.list(KUEUE, CHECK_KIND):
        conditions = (check.get("status") or {}).get("conditions") or []
        found[check["metadata"]["name"]] = any(c.get("type") == "Active" and c.get("status") == "True"
                                               for c in conditions)
    return [name for name in names if not found.get(name)]


def states(objects, job) -> list[dict]:
    workload = objects.get(KUEUE, "Workload", job.namespace, job.scheduler_object) or {}
    return list((workload.get("status") or {}).get("admissionChecks") or [])


def sync(objects, job, names: list[str], now: float) -> list[dict]:
    """One entry per listed check (new ones Pending), none for others; written only when it changed."""
    current = states(objects, job)
    by_name = {c.get("name"): c for c in current}
    wanted = [by_name.get(name) or {"name": name, "state": "Pending", "message": "", "lastTransitionTime": iso(now)}
              for name in names]
    if wanted != current:
        objects.patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object,
                             {"admissionChecks": wanted or None})
    return wanted


def all_ready(entries: list[dict]) -> bool:
    return all(c.get("state") == "Ready" for c in entries)


def in_state(entries: list[dict], state: str) -> list[dict]:
    return [c for c in entries if c.get("state") == state]


def message(entries: list[dict], state: str) -> str:
    """buildAdmissionChecksMessage: `AdmissionCheck(s) in <state> state: "name" (message); ...`."""
    parts = [f'"{c["name"]}" ({c["message"]})' if c.get("message") else f'"{c["name"]}"'
             for c in sorted(entries, key=lambda c: c["name"])]
    noun = "AdmissionChecks" if len(entries) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


def requeue_after(entries: list[dict]) -> float:
    return float(max((c.get("requeueAfterSeconds") or 0 for c in entries), default=0))


def reset(entries: list[dict], now: float) -> list[dict]:
    """resetChecksOnEviction: every check not Pending goes back to Pending; a Retry counts one more retry."""
    result = []
    for entry in entries:
        if entry.get("state") == "Pending":
            result.append(entry)
            continue
        reset_entry = {"name": entry["name"], "state": "Pending",
                       "message": f"Reset to Pending after eviction. Previously: {entry.get('state')}",
                       "lastTransitionTime": iso(now)}
        if entry.get("requeueAfterSeconds") is not None:
            reset_entry["requeueAfterSeconds"] = entry["requeueAfterSeconds"]
        if entry.get("state") == "Retry":
            reset_entry["retryCount"] = int(entry.get("retryCount") or 0) + 1
        elif entry.get("retryCount") is not None:
            reset_entry["retryCount"] = entry["retryCount"]
        result.append(reset_entry)
    return result


def reserved(job, conditions: list[dict], now: float, assignments: list[dict]) -> dict:
    """Quota reserved, not admitted: checks are not all Ready (the Admitted reason with
    UnadmittedWorkloadsObservability off, its v0.19 default)."""
    return {"conditions": set_conditions(
        conditions,
        condition("QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {job.cluster_queue}", now),
        condition("Admitted", False, "UnsatisfiedChecks", "The workload has not all checks ready", now)),
        "admission": {"clusterQueue": job.cluster_queue, "podSetAssignments": assignments}}


def evicted(conditions: list[dict], entries: list[dict], now: float, *, reason: str, text: str) -> dict:
    """Evicted by a check (Retry) or deactivated (Rejected): the reservation goes, the checks are reset."""
    updates = [condition("Evicted", True, reason, text, now),
               condition("QuotaReserved", False, "Pending", text, now),
               condition("Admitted", False, "NoReservationUnsatisfiedChecks",
                         "The workload has no reservation and not all checks ready", now)]
    if reason == EVICTED_BY_CHECK:
        updates.append(condition("Requeued", True, reason, text, now))
    return {"conditions": set_conditions(conditions, *updates), "admission": None,
            "admissionChecks": reset(entries, now) or None}


def write_reserved(objects, job, now: float, podset_assignments: list[dict]) -> None:
    conditions = objects.conditions(KUEUE, "Workload", job.namespace, job.scheduler_object)
    objects.patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object,
                         reserved(job, conditions, now, podset_assignments))


def write_evicted(objects, job, entries: list[dict], now: float, reason: str, text: str) -> None:
    conditions = objects.conditions(KUEUE, "Workload", job.namespace, job.scheduler_object)
    objects.patch_status(KUEUE, "Workload", job.namespace, job.scheduler_object,
                         evicted(conditions, entries, now, reason=reason, text=text))


def progress(kueue, now: float) -> None:
    """Workloads holding quota while their checks decide: admitted when all are Ready, evicted on a Retry,
    deactivated on a Rejected."""
    objects, sim = kueue.objects, kueue.sim
    for jobs in list(kueue.admitted.values()):
        for job in [j for j in jobs.values() if j.state == "reserved"]:
            entries = states(objects, job)
            if all_ready(entries):
                sim.start_reserved(job, now)
            elif rejected := in_state(entries, "Rejected"):
                objects.patch(KUEUE, "Workload", job.namespace, job.scheduler_object, {"spec": {"active": False}})
                write_evicted(objects, job, entries, now, DEACTIVATED,
                              f"The workload is deactivated due to {message(rejected, 'Rejected')}")
                sim.deactivate(job)
            elif retry := in_state(entries, "Retry"):
                sim.evict(job, now, f"Evicted due to {message(retry, 'Retry')}", reason=EVICTED_BY_CHECK)
                job.requeue_at = now + requeue_after(retry)
