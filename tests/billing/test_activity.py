"""The pure rules of billing/activity.py and the sandbox source's per-job activity."""

from datetime import UTC, datetime, timedelta

import pytest
import yaml

from billing import activity, metrics
from composition.demo import usage as sandbox_usage
from composition.demo.usage import ACTIVITIES, SandboxSource

H = datetime(2026, 3, 2, 10, tzinfo=UTC)


@pytest.mark.parametrize(("exported", "best"), [
    (activity.FIELDS, activity.SM_ACTIVE),
    ({activity.GPU_UTIL, activity.GR_ENGINE_ACTIVE, activity.TENSOR_ACTIVE}, activity.GR_ENGINE_ACTIVE),
    ({activity.GPU_UTIL}, activity.GPU_UTIL),
    ({activity.TENSOR_ACTIVE}, ""),
    ((), ""),
])
def test_the_best_signal_is_sm_activity_then_engine_activity_then_gpu_utilisation(exported, best):
    assert activity.best_signal(exported) == best


@pytest.mark.parametrize(("signal", "utilisation", "memory", "idle", "reason", "caveat"), [
    (activity.SM_ACTIVE, 0.0003, 1.5, True, "does no work (SM activity 0.0 %)", ""),
    (activity.GR_ENGINE_ACTIVE, 0.2364, 1.5, False, "busy (graphics engine activity (time-based) 23.6 %)",
     activity.TINY_KERNELS),
    (activity.GPU_UTIL, 0.0004, 41.5, True,
     "holds 41.5 GiB of memory per GPU but does no work (GPU utilisation (time-based) 0.0 %)", ""),
    (activity.SM_ACTIVE, 0.9329, 1.7, False, "busy (SM activity 93.3 %)", ""),
    ("", 0.5, 0, False, "busy (an unrecorded signal 50.0 %)", activity.TINY_KERNELS),
])
def test_idle_means_no_work_whatever_memory_is_held(signal, utilisation, memory, idle, reason, caveat):
    assert activity.judge_idle(signal=signal, utilisation=utilisation, memory_gib=memory, threshold=0.05) == \
        activity.Verdict(idle, reason, caveat)


def test_busy_sms_without_tensor_pipe_activity_are_named():
    note = activity.tensor_note
    assert note(sm_active=0.9, tensor_active=0.0, threshold=0.05) == "busy, but no tensor cores used"
    assert note(sm_active=0.9, tensor_active=0.6, threshold=0.05) == ""
    assert note(sm_active=0.01, tensor_active=0.0, threshold=0.05) == ""  # idle: nothing to say about tensors
    assert note(sm_active=None, tensor_active=0.0, threshold=0.05) == ""


def test_the_exporter_config_keeps_the_portal_fields_and_turns_sm_activity_on():
    config = activity.exporter_config("gpu-operator")
    configmap = yaml.safe_load(config["configmap"])
    assert (configmap["kind"], configmap["metadata"]) == ("ConfigMap", {"name": "dcgm-exporter-metrics",
                                                                        "namespace": "gpu-operator"})
    csv_lines = configmap["data"]["dcgm-metrics.csv"].splitlines()
    values = yaml.safe_load(config["operator_values"])["dcgmExporter"]["config"]
    assert (values["name"], values["create"]) == ("dcgm-exporter-metrics", True)
    assert values["data"].splitlines() == csv_lines
    fields = [line.split(",")[0] for line in csv_lines]
    assert fields[-2:] == ["DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY"]
    assert {activity.GPU_UTIL, activity.GR_ENGINE_ACTIVE, activity.TENSOR_ACTIVE, "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_POWER_USAGE"} <= set(fields)
    assert all(len(line.split(",")) == 3 and not line.startswith("#") for line in csv_lines)
    assert config["lines"].splitlines() == csv_lines[-2:]


def _pod(name, doing="", *, job="", start=H - timedelta(hours=1)):
    env = [{"name": sandbox_usage.ACTIVITY_ENV, "value": doing}] if doing else []
    return {"metadata": {"name": name, "namespace": "alpha", "labels": {metrics.JOB_LABEL: job} if job else {}},
            "spec": {"containers": [{"name": "main", "env": env,
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Running", "startTime": start.isoformat().replace("+00:00", "Z")}}


def test_a_sandbox_job_sets_what_its_gpus_do_and_the_source_reads_the_best_field():
    pods = [_pod(doing, doing, job=str(i)) for i, doing in enumerate(ACTIVITIES, start=1)]
    runs = sandbox_usage.pod_runs(pods, models={("nvidia.com/gpu", ""): ("NVIDIA H200", 141.0)})
    assert [r.activity for r in runs] == list(ACTIVITIES)

    with_sm = SandboxSource(lambda: runs).hour_usage(H)
    assert (with_sm.signal, with_sm.exported) == (activity.SM_ACTIVE, frozenset(activity.FIELDS))
    jobs = {doing: with_sm.jobs[("alpha", str(i))] for i, doing in enumerate(ACTIVITIES, start=1)}
    assert jobs["tiny-kernels"].used_gpu_hours == pytest.approx(0.0003)
    assert jobs["idle-memory-held"].memory_gib_hours == pytest.approx(41.5)
    assert jobs["busy-no-tensor"].sm_active_gpu_hours > 0.9 and jobs["busy-no-tensor"].tensor_active_gpu_hours == 0

    without = SandboxSource(lambda: runs, exported={activity.GPU_UTIL, activity.GR_ENGINE_ACTIVE}).hour_usage(H)
    assert without.signal == activity.GR_ENGINE_ACTIVE
    assert without.jobs[("alpha", "3")].used_gpu_hours == pytest.approx(0.2364)  # tiny kernels read busy
    assert without.jobs[("alpha", "4")].used_gpu_hours == pytest.approx(0.0001)  # memory held reads idle


def test_a_sandbox_pod_without_a_setting_keeps_its_hashed_utilisation_on_every_field():
    (run,) = sandbox_usage.pod_runs([_pod("plain")])
    doing = sandbox_usage.pod_activity(run, H)
    used = sandbox_usage.pod_utilisation("plain", H)
    assert (doing.gpu_util, doing.gr_engine_active, doing.sm_active) == (used, used, used)
    assert 0 <= doing.tensor_active <= used
