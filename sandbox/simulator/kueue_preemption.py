"""Kueue v0.19's classical preemption: which admitted workloads go so that a pending one fits.

Ported from pkg/scheduler/preemption/preemption.go (classicalPreemptions, fillBackWorkloads, workloadFits) and
pkg/scheduler/preemption/classical/{candidate_generator,hierarchical_preemption}.go:

- candidates are the preemptor's own ClusterQueue's workloads allowed by `withinClusterQueue`, and the workloads of
  ClusterQueues elsewhere in the cohort tree that are above their nominal quota, allowed by `reclaimWithinCohort`;
  only workloads using a (flavor, resource) that needs preemption count;
- order (common/ordering.go CandidatesOrdering): candidates over which the preemptor has a hierarchical advantage,
  then other ClusterQueues', then its own; within each, lower priority first, then the most recently admitted;
- candidates are taken in order until the preemptor fits; a candidate of another ClusterQueue is skipped once that
  queue (or a cohort on the way to the common ancestor) is back within its nominal quota;
- fill-back: going back from the second-last, any target whose return still leaves room for the preemptor is
  spared, so the victim set is minimal.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from . import quota_tree

REASON_WORDS = {  # HumanReadablePreemptionReasons
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}
WITHIN_CQ, HIERARCHICAL, WITHOUT_BORROWING, WHILE_BORROWING = "within", "hierarchy", "without", "while"
VARIANT_REASON = {WITHIN_CQ: "InClusterQueue", HIERARCHICAL: "InCohortReclamation",
                  WITHOUT_BORROWING: "InCohortReclamation", WHILE_BORROWING: "InCohortReclaimWhileBorrowing"}


def _usage(job) -> dict:
    total: dict = defaultdict(Decimal)
    for pod_set in job.pod_sets:
        for resource, value in pod_set.requests.items():
            flavor = job.flavors.get(pod_set.name, {}).get(resource)
            if flavor:
                total[(flavor, resource)] += value * pod_set.count
    return total


def _satisfies(policy: str, preemptor, candidate) -> bool:
    """SatisfiesPreemptionPolicy (common/preemption_policy.go)."""
    if policy == "LowerPriority":
        return candidate.priority < preemptor.priority
    if policy == "LowerOrNewerEqualPriority":
        return candidate.priority < preemptor.priority or (
            candidate.priority == preemptor.priority and preemptor.seq < candidate.seq)
    return policy == "Any"


def find_targets(job, cq_name: str, config: dict, frs: set, requests: dict, admitted: dict) -> list[tuple]:
    nodes, policy = config["nodes"], config["cq"][cq_name]["preemption"]
    queue = nodes[cq_name]
    within = policy.get("withinClusterQueue", "Never")
    reclaim = policy.get("reclaimWithinCohort", "Never")
    borrow_within = policy.get("borrowWithinCohort") or {}
    forbidden = borrow_within.get("policy", "Never") == "Never"
    threshold = borrow_within.get("maxPriorityThreshold")

    def uses(candidate) -> bool:
        return any(fr in frs for fr in _usage(candidate))

    def classify(candidate, advantage: bool) -> str | None:
        own = candidate.cluster_queue == cq_name
        if not uses(candidate) or not _satisfies(within if own else reclaim, job, candidate):
            return None
        if own:
            return WITHIN_CQ
        if advantage:
            return HIERARCHICAL
        if forbidden or candidate.priority >= job.priority or (threshold is not None and
                                                                candidate.priority > threshold):
            return WITHOUT_BORROWING
        return WHILE_BORROWING

    same = []
    if within != "Never":
        same = [(c, None, v) for c in admitted.get(cq_name, {}).values() if (v := classify(c, False))]
    hierarchy, priority = [], []
    if queue.parent is not None and reclaim != "Never":
        advantage, remaining = quota_tree.fit_in_quota(queue, requests)
        previous = None
        for root in queue.path_to_root():
            found = hierarchy if advantage else priority
            _collect(root, root, previous, queue, frs, admitted, classify, advantage, found)
            fits, remaining = quota_tree.fit_in_quota(root, remaining)
            advantage = advantage or fits
            previous = root

    def order(item):
        candidate = item[0]
        return (candidate.cluster_queue == cq_name, candidate.priority, -candidate.admitted_at, candidate.uid)

    candidates = sorted(hierarchy, key=order) + sorted(priority, key=order) + sorted(same, key=order)
    others = bool(hierarchy or priority)
    under_nominal = all(queue.quotas.get(fr, quota_tree.Quota()).nominal > queue.usage.get(fr, 0) for fr in frs)
    if not others or (forbidden and not under_nominal):
        attempts = [True]
    elif forbidden and not hierarchy:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for allow_borrowing in attempts:
        targets = []
        for candidate, lca, variant in candidates:
            if not _valid(candidate, lca, variant, allow_borrowing, cq_name, nodes, frs):
                continue
            _remove(candidate, nodes)
            targets.append((candidate, VARIANT_REASON[variant]))
            if _fits(queue, requests, allow_borrowing):
                targets = _fill_back(queue, requests, allow_borrowing, targets, nodes)
                for target, _ in targets:
                    _add(target, nodes)
                return targets
        for target, _ in targets:
            _add(target, nodes)
    return []


def _collect(current, subtree_root, skip, queue, frs, admitted, classify, advantage, found) -> None:
    """collectCandidatesInSubtree: workloads of ClusterQueues above nominal, in cohorts above nominal."""
    for child in current.children:
        if child is skip or child is queue:
            continue
        if child.is_queue:
            if not quota_tree.within_nominal(child, frs):
                found.extend((c, subtree_root, v) for c in admitted.get(child.name, {}).values()
                             if (v := classify(c, advantage)))
        elif not quota_tree.within_nominal(child, frs):
            _collect(child, subtree_root, skip, queue, frs, admitted, classify, advantage, found)


def _valid(candidate, lca, variant, allow_borrowing, cq_name, nodes, frs) -> bool:
    """candidateIsValid: another queue's workload is a target only while that queue still borrows."""
    if candidate.cluster_queue == cq_name:
        return True
    if allow_borrowing and variant == WITHOUT_BORROWING:
        return False
    node = nodes[candidate.cluster_queue]
    if quota_tree.within_nominal(node, frs):
        return False
    for ancestor in node.path_to_root():
        if ancestor is lca:
            break
        if quota_tree.within_nominal(ancestor, frs):
            return False
    return True


def _fits(queue, requests: dict, allow_borrowing: bool) -> bool:
    for fr, value in requests.items():
        if not allow_borrowing and quota_tree.borrowing_with(queue, fr, value):
            return False
        if value > quota_tree.available(queue, fr):
            return False
    return True


def _fill_back(queue, requests, allow_borrowing, targets, nodes) -> list:
    for i in range(len(targets) - 2, -1, -1):
        _add(targets[i][0], nodes)
        if _fits(queue, requests, allow_borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            _remove(targets[i][0], nodes)
    return targets


def _remove(candidate, nodes) -> None:
    for fr, value in _usage(candidate).items():
        quota_tree.remove_usage(nodes[candidate.cluster_queue], fr, value)


def _add(candidate, nodes) -> None:
    for fr, value in _usage(candidate).items():
        quota_tree.add_usage(nodes[candidate.cluster_queue], fr, value)


def preempted_message(preemptor, reason: str, preemptor_path: str, preemptee_path: str) -> str:
    """preemptionMessage in pkg/scheduler/preemption/preemption.go."""
    return (f"Preempted to accommodate a workload (UID: {preemptor.scheduler_uid or 'UNKNOWN'}, JobUID: "
            f"{preemptor.uid or 'UNKNOWN'}) due to {REASON_WORDS[reason]}; preemptor path: {preemptor_path}; "
            f"preemptee path: {preemptee_path}")
