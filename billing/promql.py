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

from tenants.choices import ScrapeShape

JOB_LABEL = "gpu-portal.io/job"
# kube-state-metrics exposes allow-listed pod labels on kube_pod_labels as label_<sanitized name>.
KSM_JOB_LABEL = "label_gpu_portal_io_job"
GPU_RESOURCES = 'resource=~"nvidia_com_gpu|nvidia_com_mig_.*"'
DEVICE = "UUID, GPU_I_ID, GPU_I_PROFILE, modelName"  # one GPU or MIG instance, whatever its node label is called
EXPORTED_POD, SAME_POD = 'exported_pod!=""', 'exported_pod=""'
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


def _workload_from_exported(expr: str) -> str:
    """The workload's namespace and pod from the exported_* labels (empty where the exporter set none)."""
    return (f'label_replace(label_replace({expr}, "namespace", "$1", "exported_namespace", "(.*)"), '
            f'"pod", "$1", "exported_pod", "(.*)")')


def device_series(metric: str, shape: str, *, step: int | None = None, matchers: str = "") -> str:
    """One series per device (and per pod holding it) whose `namespace`/`pod` name the workload in any shape.

    With `step`, each value is the mean of every sample in the step ending at the evaluation time, not one sample.
    """
    def read(*extra: str) -> str:
        selector = _selector(metric, matchers, *extra)
        return f"avg_over_time({selector}[{step}s])" if step else selector

    if shape == ScrapeShape.DIRECT:
        expr = read()
    elif shape == ScrapeShape.EXPORTED:
        expr = _workload_from_exported(read())
    else:  # either: a series with exported_* labels was stored with honorLabels false, any other as it came
        expr = f"{_workload_from_exported(read(EXPORTED_POD))} or {read(SAME_POD)}"
    # Folding by device identity counts a device once when its node label is renamed (Hostname → hostname).
    return f"max by (namespace, pod, {DEVICE}) ({expr})"


def _held(expr: str) -> str:
    return f"({expr}) * on (namespace, pod) group_left () {HOLDERS}"


def utilisation(shape: str, step: int) -> str:
    """0..1 per device: GPU_UTIL does not exist for MIG instances, the graphics engine activity does."""
    whole = device_series("DCGM_FI_DEV_GPU_UTIL", shape, step=step, matchers=WHOLE_GPU)
    mig = device_series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", shape, step=step, matchers=MIG_SLICE)
    return f"{whole} / 100 or {mig}"


def queries(shape: str, step: int) -> dict[str, str]:
    """Range queries evaluated at the end of each step; each answer covers the step that ends there."""
    per_namespace = "sum by (namespace, GPU_I_PROFILE, modelName)"
    used = _held(utilisation(shape, step))
    instant_devices = device_series("DCGM_FI_DEV_POWER_USAGE", shape)
    return {
        "allocated": f"sum by (namespace, resource, node) ({GPU_REQUESTS} * on (namespace, pod, uid) group_left () "
                     f"{RUNNING_OBJECT})",
        "used": f"{per_namespace} ({used})",
        "memory": f"{per_namespace} ({_held(device_series('DCGM_FI_DEV_FB_USED', shape, step=step))})",
        "power": f"{per_namespace} ({_held(device_series('DCGM_FI_DEV_POWER_USAGE', shape, step=step))})",
        "job_allocated": f"sum by (namespace, {KSM_JOB_LABEL}) ({GPU_REQUESTS} * on (namespace, pod, uid) "
                         f"group_left () {RUNNING_OBJECT} * on (namespace, pod) group_left ({KSM_JOB_LABEL}) "
                         f"{POD_JOB})",
        "job_used": f"sum by (namespace, {KSM_JOB_LABEL}) ({used} * on (namespace, pod) group_left "
                    f"({KSM_JOB_LABEL}) {POD_JOB})",
        # Every device the exporters report, and those a running GPU pod holds: the rest is unallocated capacity.
        "capacity": f"count by (GPU_I_PROFILE, modelName) (group by ({DEVICE}) (DCGM_FI_DEV_POWER_USAGE))",
        "held": f"count by (GPU_I_PROFILE, modelName) (group by ({DEVICE}) ({_held(instant_devices)}))",
        # How many steps each exporter answered: fewer than the hour's steps is a gap.
        "coverage": ('label_replace(count(kube_pod_status_phase), "exporter", "kube-state-metrics", "", "") or '
                     f'label_replace(count(count_over_time(DCGM_FI_DEV_POWER_USAGE[{step}s])), "exporter", '
                     '"dcgm-exporter", "", "")'),
    }


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
