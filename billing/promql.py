"""The PromQL the collector sends, for each way a Prometheus may have stored dcgm-exporter's series.

What the series look like (upstream sources read at the versions named):
- dcgm-exporter 4.5.3-4.8.2 (internal/pkg/rendermetrics/render_metrics.go) labels each device series `gpu`, `UUID`,
  `pci_bus_id`, `device`, `modelName`, for a MIG instance also `GPU_I_PROFILE` and `GPU_I_ID` (the parent GPU keeps
  the `UUID`), and `Hostname` when it knows the node. Its kubernetes transformation
  (internal/pkg/transformation/kubernetes.go, const.go) adds `pod`, `namespace`, `container` and `pod_uid` to the
  series of a device a pod holds; a device no pod holds gets none of them.
- Prometheus then adds the scrape target's labels: a prometheus-operator ServiceMonitor target carries the
  exporter's own `namespace`, `pod`, `container`, `service`, `endpoint`. With `honorLabels: false`, the default of
  the GPU Operator chart (deployments/gpu-operator/values.yaml, `dcgmExporter.serviceMonitor.honorLabels`, v26.7.0)
  and of dcgm-exporter's own chart, the target's labels win and the exporter's are renamed `exported_namespace`,
  `exported_pod`, `exported_container` (Prometheus' honor_labels=false rule). With `honorLabels: true` the
  exporter's labels win where it set them, and a device no pod holds still carries the exporter pod's own
  namespace and pod from the target.
- kube-state-metrics v2.20.0 (internal/store/pod.go): `kube_pod_container_resource_requests{namespace, pod, uid,
  container, node, resource, unit}` with the resource sanitised (`nvidia_com_gpu`, `nvidia_com_mig_1g_10gb`) and
  `node` empty while the pod is unscheduled; `kube_pod_status_phase{namespace, pod, uid, phase}`; `kube_pod_labels`.
  kube-prometheus-stack scrapes it with honorLabels true, so its `namespace`/`pod` are the pod's.

In every shape a series' `namespace` may be the exporter's own, so a device counts for a pod only while
kube-state-metrics says that pod runs and requests GPUs (`HOLDERS`); every other device is unallocated capacity.
"""

from __future__ import annotations

import re

from . import activity
from .choices import ScrapeShape
from .devices import DRA_ALLOCATED

JOB_LABEL = "gpu-portal.io/job"
# kube-state-metrics exposes allow-listed pod labels on kube_pod_labels as label_<sanitized name>.
KSM_JOB_LABEL = "label_gpu_portal_io_job"
GPU_RESOURCES = 'resource=~"nvidia_com_gpu|nvidia_com_mig_.*"'
EXPORTED_POD, SAME_POD, HAS_POD = 'exported_pod!=""', 'exported_pod=""', 'pod!=""'
WHOLE_GPU, MIG_SLICE = 'GPU_I_PROFILE=""', 'GPU_I_PROFILE!=""'

# A pod counts while kube-state-metrics reports it Running. `max by` folds duplicate exporters (HA replicas) and
# the uids of a pod recreated under the same name.
RUNNING = 'max by (namespace, pod) (kube_pod_status_phase{phase="Running"} == 1)'
# Requests are joined per pod object (uid): a pod deleted and created again under its name is one object at a time.
RUNNING_OBJECT = 'max by (namespace, pod, uid) (kube_pod_status_phase{phase="Running"} == 1)'
GPU_REQUESTS = f"kube_pod_container_resource_requests{{{GPU_RESOURCES}}}"
HOLDERS = f"(group by (namespace, pod) ({GPU_REQUESTS} > 0) * on (namespace, pod) {RUNNING})"
POD_JOB = f'max by (namespace, pod, {KSM_JOB_LABEL}) (kube_pod_labels{{{KSM_JOB_LABEL}!=""}})'


def _selector(metric: str, *matchers: str) -> str:
    return f"{metric}{{{', '.join(m for m in matchers if m)}}}"


# The running GPU pods under the exported_* names, to join the honorLabels-false series without relabelling them.
HOLDERS_EXPORTED = (f'label_replace(label_replace({HOLDERS}, "exported_namespace", "$1", "namespace", "(.*)"), '
                    f'"exported_pod", "$1", "pod", "(.*)")')
UNITS = "GPU_I_PROFILE, modelName"
# The node a device is on (dcgm-exporter sets Hostname to the node's name; newer releases spell it hostname), kept
# through every fold: a pod is on one node, so keeping it adds series only where a namespace spans nodes.
NODE = "Hostname, hostname"


def pod_usage(metric: str, shape: str, *, step: int | None = None, matchers: str = "", per_pod: str = "sum",
              keep: str = "", pods: tuple[str, str] | None = None) -> str:
    """`metric` of the devices each running GPU pod holds, one series per pod and kind of unit, labelled with the
    pod's own `namespace` and `pod` whichever way the series stored them. `keep` names more labels kept through
    every fold (DEVICE: a series per device); `pods` (a namespace, a regular expression of pod names) reads only
    the devices of those pods.

    Devices are folded per pod first (1,250 pods rather than 10,000 devices), so the joins and relabelling run over
    pods; the node labels (`Hostname`, or `hostname` in newer exporters) are kept, and every sum over them adds, so
    a rename counts each device once (twice only in a step holding samples of both names, i.e. across an exporter
    restart). With `step`,
    each device's value is the mean of every sample in the step ending at the evaluation time. A device no running
    GPU pod holds (with honorLabels true it carries the exporter pod's own namespace) matches no holder and drops
    out. Either shape: a series with exported_* labels was stored with honorLabels false, any other as it came; if
    one pod showed up both ways, `or` keeps one.
    """
    def read(*picks: str) -> str:
        selector = _selector(metric, matchers, *picks)
        return f"avg_over_time({selector}[{step}s])" if step else selector

    def only(prefix: str) -> tuple[str, ...]:
        return (f'{prefix}namespace="{pods[0]}"', f'{prefix}pod=~"{pods[1]}"') if pods else ()

    labels = f"{UNITS}, {NODE}, {keep}" if keep else f"{UNITS}, {NODE}"
    exported = (f"{per_pod} by (exported_namespace, exported_pod, {labels}) ({read(EXPORTED_POD, *only('exported_'))}) "
                f"* on (exported_namespace, exported_pod) group_left () {HOLDERS_EXPORTED}")
    exported = (f'sum by (namespace, pod, {labels}) (label_replace(label_replace({exported}, "namespace", "$1", '
                f'"exported_namespace", "(.*)"), "pod", "$1", "exported_pod", "(.*)"))')
    if shape == ScrapeShape.EXPORTED:
        return exported
    direct = (f"{per_pod} by (namespace, pod, {labels}) ({read(HAS_POD, '' if shape else SAME_POD, *only(''))}) "
              f"* on (namespace, pod) group_left () {HOLDERS}")
    return direct if shape == ScrapeShape.DIRECT else f"{exported} or {direct}"


def utilisation(shape: str, step: int, signal: str = activity.GR_ENGINE_ACTIVE, **narrow) -> str:
    """0..1 per pod on `signal`, one field for whole GPUs and MIG instances alike, except GPU_UTIL (percent), which
    MIG instances do not report: with it, they read the graphics engine activity. `narrow`: pod_usage's `keep` and
    `pods`."""
    if signal not in activity.PERCENT:
        return pod_usage(signal, shape, step=step, **narrow)
    whole = pod_usage(signal, shape, step=step, matchers=WHOLE_GPU, **narrow)
    mig = pod_usage(activity.GR_ENGINE_ACTIVE, shape, step=step, matchers=MIG_SLICE, **narrow)
    return f"({whole}) / 100 or {mig}"


def _per_job(expr: str) -> str:
    return (f"sum by (namespace, {KSM_JOB_LABEL}) (({expr}) * on (namespace, pod) group_left ({KSM_JOB_LABEL}) "
            f"{POD_JOB})")


def queries(shape: str, step: int, signal: str = activity.GR_ENGINE_ACTIVE,
            exported: frozenset[str] = frozenset()) -> dict[str, str]:
    """Range queries evaluated at the end of each step; each answer covers the step that ends there. `signal` is
    the activity field "used" is read from; SM and tensor-pipe activity per job are asked for when `exported`."""
    per_namespace = f"sum by (namespace, {UNITS}, {NODE})"
    used = utilisation(shape, step, signal)
    found = {
        "allocated": f"sum by (namespace, resource, node) ({GPU_REQUESTS} * on (namespace, pod, uid) group_left () "
                     f"{RUNNING_OBJECT})",
        "dra_allocated": DRA_ALLOCATED,  # devices DRA claims hold: no resource request counts them
        "used": f"{per_namespace} ({used})",
        "memory": f"{per_namespace} ({pod_usage('DCGM_FI_DEV_FB_USED', shape, step=step)})",
        "power": f"{per_namespace} ({pod_usage('DCGM_FI_DEV_POWER_USAGE', shape, step=step)})",
        "job_allocated": f"sum by (namespace, {KSM_JOB_LABEL}) ({GPU_REQUESTS} * on (namespace, pod, uid) "
                         f"group_left () {RUNNING_OBJECT} * on (namespace, pod) group_left ({KSM_JOB_LABEL}) "
                         f"{POD_JOB})",
        "job_used": _per_job(used),
        "job_memory": _per_job(pod_usage("DCGM_FI_DEV_FB_USED", shape, step=step)),
        # Every device the exporters report, and those running GPU pods hold: the rest is unallocated capacity.
        "capacity": f"count by ({UNITS}, {NODE}) (DCGM_FI_DEV_POWER_USAGE)",
        "held": f"sum by ({UNITS}, {NODE}) ({pod_usage('DCGM_FI_DEV_POWER_USAGE', shape, per_pod='count')})",
        # How many steps each exporter answered: fewer than the hour's steps is a gap.
        "coverage": ('label_replace(count(kube_pod_status_phase), "exporter", "kube-state-metrics", "", "") or '
                     f'label_replace(count(count_over_time(DCGM_FI_DEV_POWER_USAGE[{step}s])), "exporter", '
                     '"dcgm-exporter", "", "")'),
    }
    for name, field in (("job_sm_active", activity.SM_ACTIVE), ("job_tensor_active", activity.TENSOR_ACTIVE)):
        if field in exported:
            found[name] = _per_job(pod_usage(field, shape, step=step))
    return found


# What tells one device from another: its UUID (a MIG instance keeps its parent GPU's, so GPU_I_ID too) and index.
DEVICE = "UUID, gpu, GPU_I_ID"
_POD_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _of_job(expr: str, job: str) -> str:
    """`expr`'s pods that carry the job's label, or no job label at all where kube-state-metrics exposes none (the
    name then says whose they are): a pod of another job whose name happens to share the prefix is left out."""
    if not job:
        return expr
    return (f'(({expr}) and on (namespace, pod) kube_pod_labels{{{KSM_JOB_LABEL}="{job}"}}) or '
            f'(({expr}) unless on (namespace, pod) kube_pod_labels{{{KSM_JOB_LABEL}!=""}})')


def job_gpus(shape: str, step: int, signal: str, *, namespace: str, pod_prefix: str, job: str = "") -> dict[str, str]:
    """Range queries for each device the pods named `<pod_prefix>-…` in `namespace` held (of those labelled, the
    pods of `job`): the mean of each step of activity on `signal` (0..1) and of framebuffer memory used (MiB), one
    series per device and pod."""
    if not (_POD_PREFIX.fullmatch(pod_prefix) and _POD_PREFIX.fullmatch(namespace)) or not (job.isdigit() or not job):
        raise ValueError(f"not a Kubernetes name or a job id: {namespace!r}/{pod_prefix!r}/{job!r}")
    narrow = {"keep": DEVICE, "pods": (namespace, f"{pod_prefix}-.+")}
    return {"utilisation": _of_job(utilisation(shape, step, signal, **narrow), job),
            "memory": _of_job(pod_usage("DCGM_FI_DEV_FB_USED", shape, step=step, **narrow), job)}


def activity_fields(step: int) -> str:
    """Range query: per step, which activity fields dcgm-exporter reported (label `field`), beside its power series
    (`field=""`), so a field that is there for fewer steps than power (added or dropped mid-hour) can be told."""
    seen = [f'label_replace(count(count_over_time({field}[{step}s])), "field", "{field}", "", "")'
            for field in activity.FIELDS]
    return " or ".join([*seen, f"count(count_over_time(DCGM_FI_DEV_POWER_USAGE[{step}s]))"])


# Instant queries at the end of the hour.
# The GPU model and MIG profile of each node's devices: a request for `nvidia.com/gpu` on a node whose GPUs are all
# cut into one MIG profile (the GPU Operator's `mig.strategy: single`) is a request for slices of that profile.
NODE_DEVICES = ("count by (Hostname, hostname, modelName, GPU_I_PROFILE) "
                "(last_over_time(DCGM_FI_DEV_POWER_USAGE[1h]))")
# Which scrape setup the series show: exported_* labels on a device a pod holds (honorLabels false), or a running GPU
# pod's own namespace/pod on the series (honorLabels true). An hour where no pod held a GPU shows neither.
SHAPE = ('label_replace(count(last_over_time(DCGM_FI_DEV_POWER_USAGE{exported_pod!=""}[1h])), "shape", "exported", '
         '"", "") or label_replace(count(last_over_time(DCGM_FI_DEV_POWER_USAGE{exported_pod="", pod!=""}[1h]) '
         f'* on (namespace, pod) group_left () group by (namespace, pod) (last_over_time({GPU_REQUESTS}[1h]) > 0)), '
         '"shape", "direct", "", "")')
EXPORTERS = ("kube-state-metrics", "dcgm-exporter")
