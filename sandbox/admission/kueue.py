"""Kueue's admission webhooks (the CRDs' CEL rules are evaluated with the schema, `sandbox.structural`).

- pkg/webhooks/clusterqueue_webhook.go (vclusterqueue.kb.io) and pkg/webhooks/common.go: resource groups
  (covered resources unique and label-key names, flavors unique, each flavor's resources in coveredResources order,
  quantities non-negative, borrowingLimit/lendingLimit only with a cohort, lendingLimit <= nominalQuota), preemption,
  flavor fungibility, fair-sharing weight, admission checks' onFlavors, at most 256 flavors / covered resources.
- pkg/webhooks/resourceflavor_webhook.go (vresourceflavor.kb.io): node labels and taints.
- pkg/webhooks/cohort_webhook.go (vcohort.kb.io): the same resource-group rules, limits only with a parent, no
  lendingLimit <= nominal check.
- pkg/controller/jobframework/validation.go (vjob.kb.io, vrayjob.kb.io): the queue-name label is a DNS-1123
  subdomain, immutable while the job runs; max-exec-time label positive.
- pkg/controller/jobframework/tas_validation.go (ValidateTASPodSetRequest, called for a batch Job's pod template by
  pkg/controller/jobs/job/job_webhook.go): at most one of the required / preferred / unconstrained topology
  annotations, and a topology annotation names a valid label key.
- pkg/controller/jobs/rayjob/rayjob_webhook.go and raycluster/common.go (vrayjob.kb.io): a queued RayJob brings its
  own cluster (rayClusterSpec), shuts it down when finished, does not autoscale, and names no worker group "head".

Denials are controller-runtime's `Denied`: 403 Forbidden, `admission webhook "<name>" denied the request: ...`.
"""

from __future__ import annotations

from ..quantity import canonical, parse_quantity
from . import fields as f

GROUP = "kueue.x-k8s.io"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
# pkg/workloadslicing: ElasticJobsViaWorkloadSlices is beta and on by default from v0.18.
ELASTIC_ANNOTATION = "kueue.x-k8s.io/elastic-job"


def _quantity(value):
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None


def _canonical(value):
    try:
        return canonical(value)
    except (ValueError, TypeError):
        return value  # the schema's validation refuses it after


def cluster_queue_default(op: str, obj: dict) -> None:
    """mclusterqueue.kb.io (CREATE): controller-runtime's defaulter answers with the whole queue encoded again
    (admission.PatchResponseFromRaw), so every quantity comes back as resource.Quantity writes it ("1024Gi" is
    "1Ti"); its finalizer is `kueue_finalizers`."""
    if op != "CREATE":
        return
    spec = obj.get("spec") or {}
    for group in spec.get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for resource in flavor.get("resources") or ():
                for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if key in resource:
                        resource[key] = _canonical(resource[key])
    fair = spec.get("fairSharing") or {}
    if "weight" in fair:
        fair["weight"] = _canonical(fair["weight"])


def _resource_groups(groups, has_parent: bool, is_cohort: bool, path: str) -> list[dict]:
    causes, seen_resources, seen_flavors = [], set(), set()
    for i, group in enumerate(groups or ()):
        if not isinstance(group, dict):
            continue
        gpath = f"{path}[{i}]"
        covered = group.get("coveredResources") or []
        for j, name in enumerate(covered):
            rpath = f"{gpath}.coveredResources[{j}]"
            causes.extend(f.invalid(rpath, name, m) for m in f.is_qualified_name(name))
            if name in seen_resources:
                causes.append(f.duplicate(rpath, name))
            seen_resources.add(name)
        for j, flavor in enumerate(group.get("flavors") or ()):
            fpath = f"{gpath}.flavors[{j}]"
            causes.extend(_flavor_quotas(flavor, covered, has_parent, is_cohort, fpath))
            if flavor.get("name") in seen_flavors:
                causes.append(f.duplicate(f"{fpath}.name", flavor.get("name")))
            seen_flavors.add(flavor.get("name"))
    return causes


def _flavor_quotas(flavor: dict, covered: list, has_parent: bool, is_cohort: bool, path: str) -> list[dict]:
    causes = []
    for i, quota in enumerate(flavor.get("resources") or ()):
        if i >= len(covered):
            break
        qpath = f"{path}.resources[{i}]"
        if quota.get("name") != covered[i]:
            causes.append(f.invalid(f"{qpath}.name", quota.get("name"), "must match the name in coveredResources"))
        nominal = _quantity(quota.get("nominalQuota"))
        if nominal is not None and nominal < 0:
            causes.append(f.invalid(f"{qpath}.nominalQuota", str(quota["nominalQuota"]), "must be greater than or "
                                                                                          "equal to 0"))
        for key in ("borrowingLimit", "lendingLimit"):
            if quota.get(key) is None:
                continue
            value, lpath = _quantity(quota[key]), f"{qpath}.{key}"
            if not has_parent:
                causes.append(f.invalid(lpath, str(quota[key]),
                                        f"must be nil when {'parent' if is_cohort else 'cohort'} is empty"))
            if value is not None and value < 0:
                causes.append(f.invalid(lpath, str(quota[key]), "must be greater than or equal to 0"))
            if key == "lendingLimit" and not is_cohort and value is not None and nominal is not None \
                    and value > nominal:
                causes.append(f.invalid(lpath, str(quota[key]), "must be less than or equal to the nominalQuota"))
    return causes


def _fair_sharing(spec: dict) -> list[dict]:
    weight = _quantity((spec.get("fairSharing") or {}).get("weight"))
    if weight is None:
        return []
    if weight < 0:
        return [f.invalid("spec.fairSharing", str(spec["fairSharing"]["weight"]), "must be greater than or equal "
                                                                                   "to 0")]
    if 0 < weight <= parse_quantity("1n"):
        return [f.invalid("spec.fairSharing", str(spec["fairSharing"]["weight"]), "When not 0, weight must be > "
                                                                                   "10e-9")]
    return []


def _totals(groups) -> list[dict]:
    causes = []
    flavors = sum(len(g.get("flavors") or ()) for g in groups or () if isinstance(g, dict))
    covered = sum(len(g.get("coveredResources") or ()) for g in groups or () if isinstance(g, dict))
    if flavors > 256:
        causes.append(f.invalid("spec.resourceGroups", flavors, "total number of flavors across all resourceGroups "
                                                                f"must be ≤ 256, got {flavors}"))
    if covered > 256:
        causes.append(f.invalid("spec.resourceGroups", covered, "total number of covered resources across all "
                                                                f"resourceGroups must be ≤ 256, got {covered}"))
    return causes


def cluster_queue(op: str, obj: dict, old: dict | None, store) -> None:
    spec = obj.get("spec") or {}
    causes = _resource_groups(spec.get("resourceGroups"), bool(spec.get("cohortName")), False, "spec.resourceGroups")
    preemption = spec.get("preemption") or {}
    borrow = (preemption.get("borrowWithinCohort") or {}).get("policy", "Never")
    if preemption.get("reclaimWithinCohort") == "Never" and preemption.get("borrowWithinCohort") and borrow != "Never":
        causes.append(f.invalid("spec.preemption", preemption, "reclaimWithinCohort=Never and "
                                                               "borrowWithinCohort.Policy!=Never"))
    fungibility = spec.get("flavorFungibility") or {}
    if fungibility.get("preference") and (fungibility.get("whenCanBorrow") != "TryNextFlavor"
                                          or fungibility.get("whenCanPreempt") != "TryNextFlavor"):
        causes.append(f.invalid("spec.flavorFungibility.preference", fungibility["preference"],
                                f'preference "{fungibility["preference"]}" requires both whenCanBorrow and '
                                "whenCanPreempt to be TryNextFlavor"))
    causes += _fair_sharing(spec) + _totals(spec.get("resourceGroups"))
    flavors = [fl.get("name") for g in spec.get("resourceGroups") or () for fl in g.get("flavors") or ()]
    checks = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or ()
    for i, check in enumerate(checks):
        for j, flavor in enumerate(check.get("onFlavors") or ()):
            if flavor not in flavors:
                causes.append(f.not_supported(f"spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors[{j}]",
                                              flavor, flavors))
    if causes:
        raise f.forbidden_by_webhook("vclusterqueue.kb.io", causes)


def cohort(op: str, obj: dict, old: dict | None, store) -> None:
    spec = obj.get("spec") or {}
    causes = _fair_sharing(spec) + _resource_groups(spec.get("resourceGroups"), bool(spec.get("parentName")), True,
                                                    "spec.resourceGroups")
    if causes:
        raise f.forbidden_by_webhook("vcohort.kb.io", causes)


def resource_flavor(op: str, obj: dict, old: dict | None, store) -> None:
    """resourceflavor_webhook.go ValidateResourceFlavor: node labels, node taints unique by key and effect (the
    tolerations' rules are the CRD's CEL rules)."""
    spec = obj.get("spec") or {}
    causes = []
    for key, value in (spec.get("nodeLabels") or {}).items():
        causes.extend(f.invalid("spec.nodeLabels", key, m) for m in f.is_qualified_name(key))
        causes.extend(f.invalid(f"spec.nodeLabels[{key}]", value, m) for m in f.is_label_value(str(value)))
    seen = set()
    for i, taint in enumerate(spec.get("nodeTaints") or ()):
        path = f"spec.nodeTaints[{i}]"
        causes.extend(f.invalid(f"{path}.key", taint.get("key", ""), m) for m in f.is_qualified_name(taint.get("key",
                                                                                                            "")))
        errs = f.is_label_value(str(taint.get("value", "")))
        if errs:
            causes.append(f.invalid(f"{path}.value", taint.get("value", ""), ";".join(errs)))
        pair = (taint.get("key"), taint.get("effect"))
        if pair in seen:
            causes.append(f.cause(path, 'Duplicate value: "object": taints must be unique by key and effect pair',
                                  "FieldValueDuplicate"))
        seen.add(pair)
    if causes:
        raise f.forbidden_by_webhook("vresourceflavor.kb.io", causes)


def _job_label_causes(op: str, obj: dict, old: dict | None, suspended: bool) -> list[dict]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    causes = []
    queue = labels.get(QUEUE_LABEL)
    if queue is not None and op == "CREATE":
        errs = f.is_dns1123_subdomain(queue)
        if errs:
            causes.append(f.invalid(f"metadata.labels[{QUEUE_LABEL}]", queue, ",".join(errs)))
    if op == "CREATE" and MAX_EXEC_LABEL in labels:
        value = labels[MAX_EXEC_LABEL]
        try:
            if int(value) <= 0:
                causes.append(f.invalid(f"metadata.labels[{MAX_EXEC_LABEL}]", int(value), "should be greater than 0"))
        except ValueError:
            causes.append(f.invalid(f"metadata.labels[{MAX_EXEC_LABEL}]", value,
                                    f'strconv.Atoi: parsing "{value}": invalid syntax'))
    if op == "UPDATE" and old is not None and not suspended:
        before = ((old.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
        if before != queue:
            causes.append(f.invalid(f"metadata.labels[{QUEUE_LABEL}]", queue or "", "field is immutable"))
    return causes


TOPOLOGY_ANNOTATIONS = ("kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology",
                        "kueue.x-k8s.io/podset-unconstrained-topology")


def _topology_causes(metadata: dict, path: str) -> list[dict]:
    annotations = metadata.get("annotations") or {}
    found = [key for key in TOPOLOGY_ANNOTATIONS if key in annotations]
    causes = []
    if len(found) > 1:
        listed = ", ".join(f'"{key}"' for key in TOPOLOGY_ANNOTATIONS)
        causes.append(f.cause(f"{path}.annotations",
                              f"Invalid value: must not contain more than one topology annotation: [{listed}]"))
    for key in TOPOLOGY_ANNOTATIONS[:2]:
        if key in annotations:
            causes.extend(f.invalid(f"{path}.annotations[{key}]", annotations[key], m)
                          for m in f.is_qualified_name(str(annotations[key])))
    return causes


def batch_job(op: str, obj: dict, old: dict | None, store) -> None:
    causes = _job_label_causes(op, obj, old, bool((obj.get("spec") or {}).get("suspend")))
    template = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
    causes += _topology_causes(template, "spec.template.metadata")
    if causes:
        raise f.forbidden_by_webhook("vjob.kb.io", causes)


def ray_job(op: str, obj: dict, old: dict | None, store) -> None:
    spec = obj.get("spec") or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    causes = []
    if labels.get(QUEUE_LABEL):
        selector, cluster = spec.get("clusterSelector"), spec.get("rayClusterSpec")
        if selector and cluster:
            causes.append(f.invalid("spec.clusterSelector", selector, "a kueue managed job should not use an "
                                                                      "existing cluster"))
        elif not selector and not cluster:
            causes.append(f.required("spec.rayClusterSpec", "rayClusterSpec is required for Kueue-managed jobs "
                                                            "that don't use clusterSelector"))
        elif cluster:
            if not spec.get("shutdownAfterJobFinishes"):
                causes.append(f.invalid("spec.shutdownAfterJobFinishes", bool(spec.get("shutdownAfterJobFinishes")),
                                        "a kueue managed job should delete the cluster after finishing"))
            elastic = ((obj.get("metadata") or {}).get("annotations") or {}).get(ELASTIC_ANNOTATION) == "true"
            if cluster.get("enableInTreeAutoscaling") and not elastic:
                causes.append(f.invalid("spec.rayClusterSpec.enableInTreeAutoscaling", True,
                                        "a kueue managed job should only use autoscaling when workload slicing is "
                                        "enabled"))
            for i, group in enumerate(cluster.get("workerGroupSpecs") or ()):
                if group.get("groupName") == "head":
                    causes.append(f.forbidden(f"spec.rayClusterSpec.workerGroupSpecs[{i}].groupName",
                                              '"head" is reserved for the head group'))
    causes += _job_label_causes(op, obj, old, bool(spec.get("suspend")))
    if causes:
        raise f.forbidden_by_webhook("vrayjob.kb.io", causes)


MUTATORS = {(GROUP, "ClusterQueue"): cluster_queue_default}
VALIDATORS = {(GROUP, "ClusterQueue"): cluster_queue, (GROUP, "Cohort"): cohort, ("batch", "Job"): batch_job,
              ("ray.io", "RayJob"): ray_job, (GROUP, "ResourceFlavor"): resource_flavor}
