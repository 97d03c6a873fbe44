"""The sandbox's simulator measured against the real Kueue, Volcano and KubeRay: bench/CONTROLLERS.md from what the
controllers lane recorded (`make test-controllers` writes var/controllers/observations.json; see
tests/controllers/scenarios.py). Each scenario ran on both targets; the report compares them field by field on
what the portal depends on: the order of admission, the preemption victims, the state and message the status sync
recorded for each job, the reasons on the scheduler's own record, and the sentences the job page shows.

    python -m bench.controllers [--observations var/controllers/observations.json] [--out bench/CONTROLLERS.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OBSERVATIONS = ROOT / "var" / "controllers" / "observations.json"
OUT = ROOT / "bench" / "CONTROLLERS.md"
PER_JOB = ("state", "message", "why_waiting", "outcome", "placement", "conditions", "phase")

# A difference the simulator keeps on purpose, with why: (scenario, field) -> reason. A difference not listed here
# is one to fix in the simulator.
_NO_RAY = ("kwok's pods run no Ray: KubeRay reads a Ray job's status from the head's dashboard, which no fake pod "
           "serves, so the real RayJob stays Running with no job status (the simulator plays a Ray cluster that "
           "answers)")
_RAY_PODS_EARLY = ("KubeRay makes a RayJob's pods before Volcano lets its PodGroup in, so the real gang plugin marks "
                   "the waiting PodGroup Unschedulable (\"pod group is not ready\") and Volcano never removes a "
                   "condition; the simulator makes the pods at admission, as for a vcjob. The portal's state, words "
                   "and sentences agree: the enqueue refusal comes first")
KEPT: dict[tuple[str, str], str] = {
    ("kueue + kuberay: the RayJob starts when the CPUs are free", "tune.state"): _NO_RAY,
    ("kueue + kuberay: the RayJob starts when the CPUs are free", "tune.conditions"):
        _NO_RAY + "; Kueue's PodsReady follows the RayCluster status KubeRay copies with the job status",
    ("volcano + kuberay: the RayJob starts when the CPUs are free", "tune.state"): _NO_RAY,
    ("volcano + kuberay: the RayJob starts when the CPUs are free", "tune.conditions"): _RAY_PODS_EARLY,
    ("volcano + kuberay: a RayJob waits for its submitter's CPU", "tune.conditions"): _RAY_PODS_EARLY,
}
# Volcano counts DRA claims against a Queue only from v1.15, in its capacity plugin (pkg/scheduler/plugins/capacity/
# capacity.go, DeviceClassCountPrefix `deviceclass/`), as the portal tells an operator to configure it and the
# simulator plays; the v1.14.1 built here has no such count (nor has proportion, in either release).
_DRA_V114 = ("Volcano v1.14.1 (the release the module proxy lets us build) counts no DRA claims against a Queue, so "
             "the job over the quota passes enqueue (Inqueue, counted as admitted) and it is the team's "
             "ResourceQuota that refuses its worker's claim, the predicates plugin saying only \"ResourceClaim not "
             "created yet\"; v1.15's capacity plugin refuses it at enqueue, as the simulator does. The page says "
             "quota in both")
KEPT |= {("volcano: devices claimed through DRA", field): _DRA_V114 for field in (
    "admission order", "second.conditions", "second.message", "second.phase", "second.why_waiting")}
# Volcano's reclaim, as the scenario runs it on each target (tests/controllers/test_volcano.py).
_RECLAIM_VICTIM = ("the real reclaim action evicts on the first node where the capacity plugin allows a victim, and "
                   "tries the nodes from where its last predicate pass stopped, sixteen at a time in parallel "
                   "(util/predicate_helper.go PredicateNodes, lastProcessedNodeIndex), so either of nlp's jobs may go "
                   "from one run to the next; the simulator starts from the first node, where `base` runs. Whichever "
                   "job goes, both targets restart it and the page says the same of it, but for the predicates' "
                   "\"Origin reason\" the real gang's words add")
_RECLAIM_TICK = ("observed when the victim is seen preempted: the simulator admits vision's job a tick before its "
                 "pod runs; the real gang's Unschedulable condition from its wait stays beside Scheduled")
KEPT |= {("volcano: borrowing and its reclaim", field): _RECLAIM_VICTIM for field in (
    "preempted", *(f"{job}.{key}" for job in ("base", "burst")
                   for key in ("conditions", "message", "outcome", "phase", "state")))}
KEPT |= {("volcano: borrowing and its reclaim", field): _RECLAIM_TICK for field in (
    "own.conditions", "own.phase", "own.state")}
# What the comparison has led to so far, in the simulator and in the portal (before: the state it replaced).
FIXED = (
    "The simulator writes Kueue's `Active` condition on ClusterQueues and LocalQueues (before: none).",
    "The simulator runs Kueue v0.19's waitForPodsReady: `PodsReady` conditions, eviction after the timeout with "
    "`requeueState` and backoff (before: pods that never started were never evicted).",
    "An evicted workload's reservation is released as `QuotaReserved` False `Pending`, as Kueue's job reconciler "
    "writes it (before: the eviction's reason; the PodsReady-timeout scenario agreed on 7 of 8 fields).",
    "The portal writes a GPU request beside the limit: the real Kueue counted the portal's jobs as 0 GPUs under the "
    "namespace LimitRange's default request of 0 and admitted all of them, where the simulator counted the limit.",
    "The portal reads a Volcano RayJob's wait from KubeRay's PodGroup: KubeRay marks the RayJob Initializing at "
    "once, so the real run showed a RayJob refused by its queue as admitted (before: admitted, no words; the "
    "simulator, which writes nothing on the RayJob until admission: queued, no words).",
    "The page says a job waits for CPU or memory, not GPUs, when the scheduler says so, and counts a Ray job's head "
    "and KubeRay's submitter (before: \"Waiting for 8 nvidia.com/gpu\" beside Kueue's words about the submitter's "
    "CPU).",
    "The page says a DRA job whose worker's claim the team's ResourceQuota refused waits for quota (before: "
    "\"Placement, not quota, is what blocks\", from Volcano's gang words around the DRA plugin's \"ResourceClaim "
    "not created yet\").",
    "A team's ClusterQueue covers CPU, memory and GPUs in one resource group, so Kueue's TAS places a rack-bound job "
    "(before: the real Kueue refused it, `Flavor \"gpu-portal-cpu\" does not support TopologyAwareScheduling`, "
    "where the simulator placed it; the rack-bound scenario agreed on 2 of 14 fields). The simulator now checks a "
    "flavor's TAS match as Kueue does, writes the hostname level alone, binds the pods to their assigned nodes and "
    "adds Kueue's exclusion stats to its no-fit words; the portal reads Kueue's `individual` values and the job's "
    "rack from its nodes' labels.",
    "The page shows a Volcano job preempted when Volcano's job controller restarts it after its pod was evicted "
    "(`retryCount`): the real controller writes no reason (before: queued, \"Placement, not quota, is what blocks\", "
    "in the gang's words, where the simulator's `PodEvicted` made it preempted).",
    "The simulator's capacity plugin caps a Volcano queue at its real capability, the cluster less the other queues' "
    "guarantees (level by level with hierarchical queues), and counts a pod bound to a node by hand on that node, so "
    "the reclaim scenario runs in one world on both targets (before: the queue's capability alone, so the simulator "
    "needed two nodes where the real Volcano needed three, one held by a pod outside the queues).",
    "The simulator restarts a Volcano job evicted by reclaim or preempt as the job controller does (`retryCount` + 1, "
    "no reason, its PodGroup made anew), writes the scheduler's `Evict` Events on the PodGroup and the pod, and "
    "reclaims on the first node with a victim; the page says from the PodGroup's latest `Evict` Event that Volcano "
    "reclaimed the job's GPUs for a queue below its guaranteed share, or preempted it for higher-priority work "
    "(before: the simulator wrote `PodEvicted` and \"Evicted by reclaim to schedule vision/<job>\" into the job's "
    "status; the page said only \"Its pods were evicted and Volcano restarted it\"; the reclaim scenario agreed on 10 "
    "of 23 fields, now on 19 when both targets evict the same job).",
    "The portal's Volcano Queues set no guarantee, only a deserved share the reclaim gives back, as Kueue lends and "
    "reclaims a nominal quota (before: a guarantee of the team's GPUs, which the capacity plugin holds back from "
    "every other queue, so on a cluster whose GPUs were all guaranteed no team could use its burst; the simulator hid "
    "it until it capped queues at their real capability).",
)


def fields(seen: dict) -> dict[str, object]:
    """One scenario's observation flattened to comparable fields."""
    out: dict[str, object] = {"admission order": seen.get("admitted"), "preempted": seen.get("preempted")}
    for name, job in sorted((seen.get("jobs") or {}).items()):
        for key in PER_JOB:
            if key in job or key == "state":
                out[f"{name}.{key}"] = job.get(key)
    return out


def compare(observations: dict) -> list[dict]:
    rows = []
    for scenario in sorted(observations):
        by_target = observations[scenario]
        real, simulated = by_target.get("controllers"), by_target.get("simulator")
        if real is None or simulated is None:
            rows.append({"scenario": scenario, "missing": "controllers" if real is None else "simulator"})
            continue
        a, b = fields(real), fields(simulated)
        keys = sorted(set(a) | set(b), key=lambda k: (k not in ("admission order", "preempted"), k))
        differences = [{"field": k, "real": a.get(k), "simulator": b.get(k), "kept": KEPT.get((scenario, k), "")}
                       for k in keys if a.get(k) != b.get(k)]
        rows.append({"scenario": scenario, "fields": len(keys), "agree": len(keys) - len(differences),
                     "differences": differences})
    return rows


def _cell(value) -> str:
    if isinstance(value, dict):
        value = ", ".join(f"{k}: {v}" for k, v in sorted(value.items()))
    elif isinstance(value, list):
        value = ", ".join(map(str, value)) or "(none)"
    text = "(absent)" if value is None else str(value) or "(empty)"
    return text.replace("|", "\\|").replace("\n", " ")


def render(rows: list[dict], versions: str) -> str:
    compared = [r for r in rows if "fields" in r]
    total, agree = sum(r["fields"] for r in compared), sum(r["agree"] for r in compared)
    lines = [
        "# The simulator against the real controllers", "",
        "Generated by `python -m bench.controllers` from what `make test-controllers` recorded: every scenario of",
        "`tests/controllers/scenarios.py` ran on the real controllers (" + versions + ", on the control plane of",
        "`tools/controlplane` with kwok's nodes) and on the sandbox's simulator, and what the portal recorded and",
        "showed is compared field by field (UIDs and generated object names replaced by placeholders).", "",
        f"Agreement: {100 * agree / total:.1f} % ({agree}/{total} fields)" if total else "Nothing compared yet.", "",
        "| scenario | agreement |", "|---|---|",
    ]
    for row in rows:
        if "missing" in row:
            lines.append(f"| {row['scenario']} | not run on the {row['missing']} |")
        else:
            lines.append(f"| {row['scenario']} | {row['agree']}/{row['fields']} |")
    lines += ["", "## Fixed from this comparison", ""] + [f"- {item}" for item in FIXED]
    for row in compared:
        if not row["differences"]:
            continue
        lines += ["", f"## {row['scenario']}", "", "| field | real | simulator | why it is kept |", "|---|---|---|---|"]
        for d in row["differences"]:
            lines.append(f"| {d['field']} | {_cell(d['real'])} | {_cell(d['simulator'])} | "
                         f"{d['kept'] or 'to fix in the simulator'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.controllers", description=__doc__.splitlines()[0])
    parser.add_argument("--observations", default=str(OBSERVATIONS))
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    path = Path(args.observations)
    if not path.exists():
        print(f"{path} does not exist: run `make test-controllers` first", file=sys.stderr)
        return 1
    from portal import upstream

    versions = f"Kueue {upstream.KUEUE_BUILT}, Volcano {upstream.VOLCANO_BUILT}, KubeRay {upstream.KUBERAY_BUILT}"
    Path(args.out).write_text(render(compare(json.loads(path.read_text())), versions))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
