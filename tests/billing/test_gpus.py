"""A job's GPUs one by one, read live: from a real Prometheus holding dcgm-exporter and kube-state-metrics series in
both scrape shapes (tests/billing/conftest.py), and from the sandbox's synthetic source; the step keeps a range to
at most 300 points, and the queries do not grow with the number of GPUs."""

from datetime import UTC, datetime, timedelta

import pytest
import requests

from billing import activity, gpus
from billing.metrics import MetricsError, PrometheusSource
from composition.demo.usage import ACTIVITIES, PodRun, SandboxSource
from tests import prometheus
from tests.billing.conftest import A100, DCGM_OFFSETS, H100, JOB_TRAIN, RUNS, VARIANTS, dcgm_up, mean

EVERY_VARIANT = pytest.mark.parametrize("variant", range(len(VARIANTS)), ids=["-".join(v) for v in VARIANTS])


class CountingSession(requests.Session):
    """A real HTTP session that counts the requests it sends."""

    def __init__(self):
        super().__init__()
        self.sent = 0

    def send(self, request, **kwargs):
        self.sent += 1
        return super().send(request, **kwargs)


def truth(scenario, variant: int, pod: str, minutes: range) -> dict[tuple[str, str], dict[datetime, tuple]]:
    """(UUID, GPU_I_ID) → {end of each minute step: (activity, memory GiB)} for the minutes the pod ran and the
    exporter answered, from the per-sample values the series were written from."""
    found: dict[tuple[str, str], dict[datetime, tuple]] = {}
    for run in RUNS:
        if run.name != pod:
            continue
        for device in run.devices:
            key = (device.labels(0)["UUID"], str(device.instance) if device.profile else "")
            for minute in minutes:
                if run.running(minute) and dcgm_up(minute):
                    at = datetime.fromtimestamp(scenario.at(variant, minute + 1, 0), UTC)
                    found.setdefault(key, {})[at] = (
                        mean(device.utilisation(minute, k) for k in range(len(DCGM_OFFSETS))),
                        mean(device.fb_used_mib(minute, k) for k in range(len(DCGM_OFFSETS))) / 1024)
    return found


def read(url, scenario, variant, *, namespace, pod_prefix, job="", session=None) -> gpus.JobGpus:
    start = scenario.hour(0, variant)
    return PrometheusSource(url, session=session).job_gpus(namespace=namespace, job=job, pod_prefix=pod_prefix,
                                                          start=start, end=start + timedelta(hours=1))


@EVERY_VARIANT
def test_each_gpu_of_a_jobs_pods_step_by_step_in_either_scrape_shape(prometheus_data, variant):
    """train-0 holds four H100s, is replaced mid-hour (a new pod object, two minutes pending) and its node's exporter
    renames Hostname to hostname at minute 40: still four GPUs, each on its node, read only while the pod ran."""
    url, scenario = prometheus_data
    found = read(url, scenario, variant, namespace="alpha", pod_prefix="train")
    assert found.step == 60 and found.signal == activity.GR_ENGINE_ACTIVE  # the best field exported
    assert [(s.gpu.uuid, s.gpu.index, s.gpu.node, s.gpu.model, s.gpu.pod) for s in found.gpus] == [
        (f"GPU-node-h100-{i}", str(i), "node-h100", H100, "train-0") for i in range(4)]
    expected = truth(scenario, variant, "train-0", range(60))
    for series in found.gpus:
        steps = expected[(series.gpu.uuid, "")]
        assert sorted(series.utilisation) == sorted(steps) == sorted(series.memory_gib)
        assert len(steps) == 58  # minutes 30 and 31 the pod was not running
        for at, (utilisation, memory) in steps.items():
            assert series.utilisation[at] == pytest.approx(utilisation, abs=1e-9), at
            assert series.memory_gib[at] == pytest.approx(memory, abs=1e-9), at
        assert series.utilisation_mean == pytest.approx(mean(u for u, _ in steps.values()), abs=1e-9)
        assert series.memory_max == pytest.approx(max(m for _, m in steps.values()), abs=1e-9)


@EVERY_VARIANT
def test_mig_slices_of_one_gpu_are_told_apart(prometheus_data, variant):
    """infer-0 holds three 1g.10gb slices of one A100: one UUID (the parent's), three instances, three series."""
    url, scenario = prometheus_data
    found = read(url, scenario, variant, namespace="beta", pod_prefix="infer")
    assert [(s.gpu.uuid, s.gpu.profile, s.gpu.instance, s.gpu.model) for s in found.gpus] == [
        ("GPU-node-a100-0", "1g.10gb", str(i), A100) for i in range(3)]
    assert found.gpus[2].gpu.name == "node-a100 GPU 0 1g.10gb #2"
    expected = truth(scenario, variant, "infer-0", range(60))
    for series in found.gpus:
        steps = expected[(series.gpu.uuid, series.gpu.instance)]
        assert len(steps) == 40  # from minute 20
        assert {at: round(v, 9) for at, v in series.utilisation.items()} == {
            at: round(u, 9) for at, (u, _) in steps.items()}


@EVERY_VARIANT
def test_another_namespace_or_pod_prefix_reads_nothing_of_the_job(prometheus_data, variant):
    url, scenario = prometheus_data
    assert read(url, scenario, variant, namespace="beta", pod_prefix="train").gpus == []  # train-0 is alpha's
    # "trai" is not the job "train": pods are named <object name>-…
    assert read(url, scenario, variant, namespace="alpha", pod_prefix="trai").gpus == []
    # A device no pod holds carries the exporter pod's namespace and name (direct shape): never a job's GPU.
    assert read(url, scenario, variant, namespace="gpu-operator", pod_prefix="nvidia-dcgm-exporter").gpus == []


@EVERY_VARIANT
def test_a_pod_labelled_as_another_jobs_is_not_this_jobs_whatever_its_name(prometheus_data, variant):
    """kube-state-metrics labels train-0 as job 7001's: read for 7001 it is; for another job it is not, though its
    name has the prefix asked for. eval-0 carries no job label, so its name alone says whose it is."""
    url, scenario = prometheus_data
    assert len(read(url, scenario, variant, namespace="alpha", pod_prefix="train", job=str(JOB_TRAIN)).gpus) == 4
    assert read(url, scenario, variant, namespace="alpha", pod_prefix="train", job="4242").gpus == []
    unlabelled = read(url, scenario, variant, namespace="alpha", pod_prefix="eval", job="4242")
    assert [(s.gpu.pod, s.gpu.index, len(s.utilisation)) for s in unlabelled.gpus] == [
        ("eval-0", "4", 30), ("eval-0", "5", 30)]  # minutes 15 to 45


def test_three_queries_whatever_the_number_of_gpus(prometheus_data):
    url, scenario = prometheus_data
    counts = {}
    for namespace, prefix in (("alpha", "train"), ("beta", "infer"), ("beta", "viz"), ("alpha", "none")):
        session = CountingSession()
        found = read(url, scenario, 0, namespace=namespace, pod_prefix=prefix, session=session)
        counts[(prefix, len(found.gpus))] = session.sent
    assert counts == {("train", 4): 3, ("infer", 3): 3, ("viz", 2): 3, ("none", 0): 3}


def test_a_long_range_is_read_in_at_most_300_steps(prometheus_data):
    url, scenario = prometheus_data
    start = scenario.hour(0, 0)
    found = PrometheusSource(url).job_gpus(namespace="alpha", job="", pod_prefix="train", start=start,
                                           end=start + timedelta(hours=HOURS_READ))
    assert found.step == 60 * 3 and found.step_label == "3 minutes"
    for series in found.gpus:
        assert 0 < len(series.utilisation) <= 300


HOURS_READ = 15  # every variant and a little more: 900 minutes in steps of 3


@pytest.mark.parametrize("hours, step, label", [
    (0.01, 60, "1 minute"), (1, 60, "1 minute"), (5, 60, "1 minute"), (5.01, 120, "2 minutes"),
    (24, 300, "5 minutes"), (24 * 7, 2040, "34 minutes"), (24 * 92, 26520, "442 minutes"), (300, 3600, "1 hour"),
])
def test_the_step_gives_at_most_300_points(hours, step, label):
    start = datetime(2026, 3, 2, tzinfo=UTC)
    end = start + timedelta(hours=hours)
    assert gpus.step_for(start, end) == step
    assert gpus.JobGpus(signal="", step=step, start=start, end=end).step_label == label
    first, last = gpus.evaluation_times(start, end, step)
    assert first == start + timedelta(seconds=step) and last >= end and (last - first).total_seconds() / step + 1 <= 300


def test_a_prometheus_that_is_down_or_too_slow_is_an_error_that_says_so():
    start = datetime(2026, 3, 2, tzinfo=UTC)
    kwargs = {"namespace": "alpha", "job": "", "pod_prefix": "train", "start": start, "end": start + timedelta(hours=1)}
    with pytest.raises(MetricsError, match="unreachable"):
        PrometheusSource(prometheus.closed_port_url()).job_gpus(**kwargs)
    with prometheus.silent_server() as url, pytest.raises(MetricsError, match="did not answer within 0.3 s"):
        PrometheusSource(url, timeout=0.3).job_gpus(**kwargs)


def test_names_that_are_not_kubernetes_names_are_refused_before_any_query():
    from billing import promql

    with pytest.raises(ValueError, match="not a Kubernetes name"):
        promql.job_gpus("", 60, activity.SM_ACTIVE, namespace="alpha", pod_prefix='x"} or vector(1) #')
    with pytest.raises(ValueError, match="or a job id"):
        promql.job_gpus("", 60, activity.SM_ACTIVE, namespace="alpha", pod_prefix="x", job='1"}')


# --- the sandbox's synthetic source ------------------------------------------------------------------------------

H = datetime(2026, 3, 2, 10, tzinfo=UTC)


def test_the_sandbox_gives_each_pod_gpu_the_activity_its_pod_is_set_to():
    runs = [PodRun("nlp", "bert-12-worker-0", "nvidia_com_gpu", 2, H, H + timedelta(minutes=30), job="12",
                   gpu_model=H100, activity="idle-memory-held", node="node-a"),
            PodRun("nlp", "bert-12-worker-1", "nvidia_com_gpu", 2, H, None, job="12", gpu_model=H100,
                   activity="busy", node="node-b"),
            PodRun("nlp", "gpt-13-worker-0", "nvidia_com_gpu", 8, H, None, job="13", gpu_model=H100, node="node-a"),
            PodRun("cv", "bert-12-worker-0", "nvidia_com_gpu", 1, H, None, job="12", node="node-c")]
    found = SandboxSource(lambda: runs).job_gpus(namespace="nlp", job="12", pod_prefix="bert-12", start=H,
                                                 end=H + timedelta(hours=1))
    assert found.signal == activity.SM_ACTIVE and found.step == 60
    assert [(s.gpu.node, s.gpu.pod, s.gpu.index) for s in found.gpus] == [
        ("node-a", "bert-12-worker-0", "0"), ("node-a", "bert-12-worker-0", "1"),
        ("node-b", "bert-12-worker-1", "0"), ("node-b", "bert-12-worker-1", "1")]
    assert len({s.gpu.uuid for s in found.gpus}) == 4 and all(s.gpu.uuid.startswith("GPU-") for s in found.gpus)
    idle, busy = found.gpus[0], found.gpus[2]
    assert len(idle.utilisation) == 30 and len(busy.utilisation) == 60  # the first pod stopped at :30
    assert set(idle.utilisation.values()) == {ACTIVITIES["idle-memory-held"].sm_active}
    assert set(idle.memory_gib.values()) == {41.5}
    assert set(busy.utilisation.values()) == {ACTIVITIES["busy"].sm_active}
    verdict = idle.verdict(signal=found.signal, threshold=0.05)
    assert verdict.idle and "holds 41.5 GiB" in verdict.reason
    assert not busy.verdict(signal=found.signal, threshold=0.05).idle


def test_a_sandbox_gpu_reads_the_hours_the_collector_bills():
    """The steps of an hour add up to that hour's collected use: one source, two granularities."""
    run = PodRun("nlp", "gpt-13-worker-0", "nvidia_com_gpu", 1, H - timedelta(hours=1), None, job="13",
                 gpu_model=H100, node="node-a")
    source = SandboxSource(lambda: [run])
    series = source.job_gpus(namespace="nlp", job="13", pod_prefix="gpt-13", start=H, end=H + timedelta(hours=1))
    hour = source.hour_usage(H).jobs[("nlp", "13")]
    assert sum(series.gpus[0].utilisation.values()) / 60 == pytest.approx(hour.used_gpu_hours)

