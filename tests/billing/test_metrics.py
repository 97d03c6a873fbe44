from datetime import UTC, datetime, timedelta

import pytest

from billing import metrics, sources
from billing.choices import ScrapeShape
from billing.metrics import MetricsError, PrometheusSource
from composition.demo import usage as sandbox_usage
from composition.demo.usage import SandboxSource
from tests import prometheus
from tests.billing.conftest import (
    A100,
    EXPORTER_NAMESPACE,
    GAP_HOUR,
    H100,
    L40S,
    MIG_FRACTION,
    NAN_HOUR,
    VARIANTS,
)

FLAVOR_KEYS = {"h100": ("nvidia_com_gpu", H100), "l40s": ("nvidia_com_gpu", L40S),
               "mig-1g": ("nvidia_com_mig_1g_10gb", A100)}
SHAPES = {"direct": ScrapeShape.DIRECT, "exported": ScrapeShape.EXPORTED}
EVERY_VARIANT = pytest.mark.parametrize("variant", range(len(VARIANTS)), ids=["-".join(v) for v in VARIANTS])


def _assert_truth(usage, scenario, index):
    truth = scenario.truth(index)
    teams = {key: value for key, value in usage.namespaces.items() if key[0] in ("alpha", "beta")}
    assert set(teams) == {(namespace, *FLAVOR_KEYS[flavor]) for namespace, flavor in truth}
    for (namespace, flavor), expected in truth.items():
        got = usage.namespaces[(namespace, *FLAVOR_KEYS[flavor])]
        # MIG power is the parent GPU's: the collector charges the slice its fraction, the source does not.
        share = float(MIG_FRACTION) if flavor == "mig-1g" else 1.0
        assert got.allocated_gpu_hours == pytest.approx(expected["allocated"], abs=1e-9), (namespace, flavor)
        assert got.used_gpu_hours == pytest.approx(expected["used"], abs=1e-9), (namespace, flavor)
        assert got.memory_gib_hours == pytest.approx(expected["memory"], abs=1e-9), (namespace, flavor)
        assert got.energy_kwh * share == pytest.approx(expected["energy"], abs=1e-9), (namespace, flavor)
    jobs = {int(job): value for (_, job), value in usage.jobs.items()}
    for job, expected in scenario.job_truth(index).items():
        assert jobs[job].allocated_gpu_hours == pytest.approx(expected["allocated"], abs=1e-9)
        assert jobs[job].used_gpu_hours == pytest.approx(expected["used"], abs=1e-9)


@EVERY_VARIANT
@pytest.mark.parametrize("setting", ["detect", "explicit"])
def test_every_scrape_setup_and_mig_strategy_gives_the_truth_of_the_series(prometheus_data, variant, setting):
    url, scenario = prometheus_data
    shape = SHAPES[VARIANTS[variant][0]]
    source = PrometheusSource(url, shape=shape if setting == "explicit" else ScrapeShape.EITHER)

    usage = source.hour_usage(scenario.hour(0, variant))

    assert usage.problems == []
    assert usage.scrape_shape == shape
    _assert_truth(usage, scenario, 0)


@pytest.mark.parametrize("variant", [1, 2])
def test_with_honor_labels_false_nothing_lands_in_the_exporters_namespace(prometheus_data, variant):
    url, scenario = prometheus_data
    usage = PrometheusSource(url).hour_usage(scenario.hour(0, variant))
    assert not [key for key in usage.namespaces if key[0] in (EXPORTER_NAMESPACE, "")]
    assert usage.namespaces[("alpha", "nvidia_com_gpu", H100)].used_gpu_hours > 1


def test_reading_honor_labels_false_series_as_if_true_finds_no_pod_and_says_so(prometheus_data):
    """The wrong explicit setting bills nothing for devices (every GPU looks unallocated) rather than billing
    the exporter's namespace; the hour's detected shape tells the two apart."""
    url, scenario = prometheus_data
    usage = PrometheusSource(url, shape=ScrapeShape.DIRECT).hour_usage(scenario.hour(0, 1))
    assert usage.scrape_shape == ScrapeShape.EXPORTED
    assert all(u.used_gpu_hours == 0 for u in usage.namespaces.values())
    assert all(seen.held == 0 for seen in usage.capacity.values())


@EVERY_VARIANT
def test_capacity_is_every_reported_device_and_held_is_what_running_gpu_pods_hold(prometheus_data, variant):
    url, scenario = prometheus_data
    usage = PrometheusSource(url).hour_usage(scenario.hour(0, variant))
    for flavor, (capacity, held) in scenario.capacity_truth(0).items():
        seen = usage.capacity[FLAVOR_KEYS[flavor]]
        assert (seen.capacity, seen.held) == (pytest.approx(capacity, abs=1e-9), pytest.approx(held, abs=1e-9))
    # 8 H100s all hour, of which train-0 held 4 but for its two-minute restart and eval-0 2 for 30 minutes.
    assert usage.capacity[FLAVOR_KEYS["h100"]].capacity == pytest.approx(8.0)
    assert usage.capacity[FLAVOR_KEYS["h100"]].held == pytest.approx(4 * 58 / 60 + 2 * 30 / 60)


def test_a_restarting_pod_a_pending_pod_and_a_renamed_hostname_count_once(prometheus_data):
    url, scenario = prometheus_data
    usage = PrometheusSource(url).hour_usage(scenario.hour(0))
    # train-0 runs 4 H100s but for minutes 30-31; eval-0 2 H100s for minutes 15-44 across the relabel at 40.
    assert usage.namespaces[("alpha", "nvidia_com_gpu", H100)].allocated_gpu_hours == pytest.approx(
        4 * 58 / 60 + 2 * 30 / 60)
    # beta's pending wait-0 asks for 2 L40S and holds none: only viz-0's 2 count.
    assert usage.namespaces[("beta", "nvidia_com_gpu", L40S)].allocated_gpu_hours == pytest.approx(2.0)


@EVERY_VARIANT
def test_integration_is_within_half_a_percent_of_the_mean_of_every_stored_sample(prometheus_data, variant):
    url, scenario = prometheus_data
    usage = PrometheusSource(url).hour_usage(scenario.hour(0, variant))
    for namespace, flavor in (("alpha", "h100"), ("beta", "l40s"), ("beta", "mig-1g")):
        got = usage.namespaces[(namespace, *FLAVOR_KEYS[flavor])].used_gpu_hours
        expected = sum(v["used"] for (ns, _), v in scenario.truth(0).items() if ns == namespace)
        assert got == pytest.approx(scenario.truth(0)[(namespace, flavor)]["used"], abs=1e-9)
    for namespace in ("alpha", "beta"):
        got = sum(u.used_gpu_hours for key, u in usage.namespaces.items() if key[0] == namespace)
        assert got == pytest.approx(scenario.samples_mean_used(0, namespace), rel=0.005)
        assert expected > 0


def test_a_gap_inside_an_hour_bills_what_was_observed_and_counts_the_steps_missing(prometheus_data):
    url, scenario = prometheus_data
    usage = PrometheusSource(url).hour_usage(scenario.hour(GAP_HOUR))
    assert usage.problems == ["dcgm-exporter answered for 50 of 60 steps"]
    assert usage.steps_missing == 10
    _assert_truth(usage, scenario, GAP_HOUR)


def test_a_nan_sample_leaves_out_its_step_only(prometheus_data):
    url, scenario = prometheus_data
    usage = PrometheusSource(url).hour_usage(scenario.hour(NAN_HOUR))
    assert len(usage.problems) == 1 and usage.problems[0].startswith("power: 1 NaN or infinite steps")
    _assert_truth(usage, scenario, NAN_HOUR)


def test_unreachable_and_slow_prometheus_raise_a_typed_error_with_the_reason():
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    with pytest.raises(MetricsError, match="is unreachable"):
        PrometheusSource(prometheus.closed_port_url(), timeout=2).hour_usage(hour)
    with prometheus.silent_server() as url, pytest.raises(MetricsError, match="did not answer within 0.3 s"):
        PrometheusSource(url, timeout=0.3).hour_usage(hour)


def test_a_rejected_query_keeps_prometheus_own_message(prometheus_data):
    url, _ = prometheus_data
    with pytest.raises(MetricsError, match="400 bad_data: .*parse error"):
        PrometheusSource(url).query("sum by (", datetime.now(UTC))


@pytest.mark.parametrize(("hour", "message"), [
    (datetime(2026, 1, 1, 10, 30, tzinfo=UTC), "not the start of an hour"),
    (datetime(2026, 1, 1, 10), "timezone-aware"),
])
def test_hours_must_be_whole_and_aware(hour, message):
    with pytest.raises(ValueError, match=message):
        SandboxSource(lambda: []).hour_usage(hour)


def test_prometheus_url_and_step_are_checked():
    with pytest.raises(ValueError, match="http"):
        PrometheusSource("file:///etc/passwd")
    with pytest.raises(ValueError, match="divide an hour"):
        PrometheusSource("http://127.0.0.1:9090", step=7)


# --- the sandbox source ----------------------------------------------------------------------------------------

H = datetime(2026, 3, 2, 10, tzinfo=UTC)


def _pod(name, *, namespace="alpha", gpus=2, resource="nvidia.com/gpu", start=H, end=None, job="", selector=None):
    status = {"phase": "Running", "startTime": start.isoformat().replace("+00:00", "Z")}
    if end is not None:
        status = {"phase": "Succeeded", "startTime": status["startTime"], "containerStatuses": [
            {"name": "main", "state": {"terminated": {"finishedAt": end.isoformat().replace("+00:00", "Z")}}}]}
    return {"metadata": {"name": name, "namespace": namespace, "labels": {metrics.JOB_LABEL: job} if job else {}},
            "spec": {"nodeSelector": selector or {}, "nodeName": f"gpu-{name}", "containers": [
                {"name": "main", "image": "ghcr.io/acme/train:1",
                 "resources": {"limits": {resource: str(gpus), "cpu": "4"}}}]},
            "status": status}


def test_sandbox_pods_become_runs_with_their_resource_model_and_job():
    pods = [_pod("a", job="12", selector={"pool": "h100"}),
            _pod("b", resource="nvidia.com/mig-1g.10gb", gpus=3, end=H + timedelta(minutes=20)),
            {"metadata": {"name": "pending", "namespace": "alpha"}, "spec": {"containers": []},
             "status": {"phase": "Pending"}}]
    done = _pod("c", gpus=1)
    done["status"] = {"phase": "Failed", "startTime": "2026-03-02T10:00:00Z", "conditions": [
        {"type": "Ready", "status": "False", "lastTransitionTime": "2026-03-02T10:40:00Z"}]}
    pods.append(done)
    runs = sandbox_usage.pod_runs(pods, models={("nvidia.com/gpu", "pool=h100"): ("H100", 80.0)})
    assert [(r.name, r.resource, r.gpus, r.gpu_model, r.job, r.finished_at) for r in runs] == [
        ("a", "nvidia_com_gpu", 2, "H100", "12", None),
        ("b", "nvidia_com_mig_1g_10gb", 3, "", "", H + timedelta(minutes=20)),
        ("c", "nvidia_com_gpu", 1, "", "", H + timedelta(minutes=40)),  # stopped when it stopped being ready
    ]
    assert [r.node for r in runs] == ["gpu-a", "gpu-b", "gpu-c"]  # where each ran (spec.nodeName)


def test_a_sandbox_slice_scheduled_as_nvidia_com_gpu_under_mig_single_is_still_its_profile():
    product = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}
    runs = sandbox_usage.pod_runs([_pod("s", selector=product)], models={
        ("nvidia.com/gpu", "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"):
            ("NVIDIA A100-SXM4-80GB", 10.0, "nvidia.com/mig-1g.10gb")})
    assert [(r.resource, r.gpu_model, r.memory_gib) for r in runs] == [
        ("nvidia_com_mig_1g_10gb", "NVIDIA A100-SXM4-80GB", 10.0)]


def test_a_sandbox_source_reports_the_declared_units_as_capacity_and_its_pods_as_held():
    pods = [_pod("a", gpus=3), _pod("b", gpus=2, start=H + timedelta(minutes=30))]
    usage = SandboxSource(lambda: sandbox_usage.pod_runs(pods), capacity={("nvidia_com_gpu", ""): 8}).hour_usage(H)
    seen = usage.capacity[("nvidia_com_gpu", "")]
    assert (seen.capacity, seen.held) == (8.0, pytest.approx(4.0))


def test_sandbox_source_allocates_by_run_time_and_is_deterministic():
    pods = [_pod("train", start=H - timedelta(hours=3), job="5"),
            _pod("short", start=H + timedelta(minutes=15), end=H + timedelta(minutes=45)),
            _pod("later", start=H + timedelta(hours=2))]
    source = SandboxSource(lambda: sandbox_usage.pod_runs(pods))

    first, again = source.hour_usage(H), SandboxSource(lambda: sandbox_usage.pod_runs(pods)).hour_usage(H)
    assert first == again
    row = first.namespaces[("alpha", "nvidia_com_gpu", "")]
    assert row.allocated_gpu_hours == pytest.approx(2 + 2 * 0.5)
    expected_used = 2 * sandbox_usage.pod_utilisation("train", H) + 1 * sandbox_usage.pod_utilisation("short", H)
    assert row.used_gpu_hours == pytest.approx(expected_used)
    assert 0 < row.used_gpu_hours <= row.allocated_gpu_hours
    assert first.jobs[("alpha", "5")].allocated_gpu_hours == pytest.approx(2)
    assert source.hour_usage(H + timedelta(hours=5)).namespaces[("alpha", "nvidia_com_gpu", "")] \
        .allocated_gpu_hours == pytest.approx(2 + 2)


def test_sandbox_utilisation_depends_only_on_pod_and_hour():
    values = [sandbox_usage.pod_utilisation(f"pod-{i}", H + timedelta(hours=h)) for i in range(40) for h in range(24)]
    assert values == [sandbox_usage.pod_utilisation(f"pod-{i}", H + timedelta(hours=h)) for i in range(40)
                      for h in range(24)]
    assert all(0 <= v <= 0.95 for v in values)
    idle = sum(v < 0.05 for v in values) / len(values)
    assert 0.02 < idle < 0.3  # some pods idle, so the idle-GPU list has something to show


@pytest.mark.django_db
def test_sandbox_source_lists_the_portal_pods_of_the_cluster(sandbox):
    from portal import kube
    from portal.naming import team_labels
    from tests.factories import ClusterFactory, GpuFlavorFactory

    cluster = ClusterFactory(server=sandbox.url)
    GpuFlavorFactory(cluster=cluster, name="h100", gpu_model="NVIDIA H100", node_labels={"pool": "h100"})
    client = kube.client_for_cluster(cluster)
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "alpha"}})
    pods = sandbox.store.kind("v1", "Pod")
    for name, labels in (("ours", {**team_labels("alpha"), metrics.JOB_LABEL: "9"}), ("foreign", {})):
        pod = _pod(name, selector={"pool": "h100"}, start=H - timedelta(hours=1))
        pod["metadata"]["labels"] = labels
        created = sandbox.store.create(pods, {"apiVersion": "v1", "kind": "Pod", **pod}, "alpha")
        created["status"] = pod["status"]
        sandbox.store.update(pods, created, "alpha", name, subresource="status")

    usage = SandboxSource.for_cluster(cluster).hour_usage(H)
    assert set(usage.namespaces) == {("alpha", "nvidia_com_gpu", "NVIDIA H100")}  # the foreign pod is not listed
    assert usage.namespaces[("alpha", "nvidia_com_gpu", "NVIDIA H100")].allocated_gpu_hours == pytest.approx(2)
    assert set(usage.jobs) == {("alpha", "9")}


@pytest.mark.django_db
def test_sandbox_source_reports_an_unreachable_cluster():
    from tests.factories import ClusterFactory

    cluster = ClusterFactory(server=prometheus.closed_port_url())
    with pytest.raises(MetricsError, match="listing pods"):
        SandboxSource.for_cluster(cluster).hour_usage(H)


@pytest.mark.django_db
def test_source_for_picks_prometheus_when_a_url_is_set():
    from tests.factories import ClusterFactory

    prometheus_cluster = ClusterFactory(usage_source__prometheus_url="http://prom:9090")
    assert isinstance(sources.source_for(prometheus_cluster), PrometheusSource)
    assert isinstance(sources.source_for(ClusterFactory()), SandboxSource)  # plugged in by the demo's wiring
    with pytest.raises(MetricsError, match="no Prometheus URL"):
        sources.source_for(ClusterFactory(connection="in_cluster", server=""))


@pytest.mark.django_db
def test_billing_knows_only_prometheus_until_a_source_is_plugged_in(monkeypatch):
    from billing.live_activity import PodReading, activity_now
    from tests.factories import ClusterFactory

    monkeypatch.setattr(sources, "_plugged", [])
    sandbox_cluster, other = ClusterFactory(), ClusterFactory(connection="in_cluster", server="")
    with pytest.raises(MetricsError, match="no Prometheus URL"):
        sources.source_for(sandbox_cluster)

    class Plugged:
        def activity_now(self, now):
            return [PodReading("team-a", "train-0", "7", "DCGM_FI_PROF_SM_ACTIVE", 0.5)]

    plugged = Plugged()
    sources.register(lambda cluster: plugged if cluster.pk == sandbox_cluster.pk else None)
    assert sources.source_for(sandbox_cluster) is plugged
    assert activity_now(plugged, H)[0].utilisation == 0.5
    with pytest.raises(MetricsError, match="no Prometheus URL"):
        sources.source_for(other)  # the plug-in serves only the clusters it says it serves
    with pytest.raises(MetricsError, match="cannot say what GPUs are doing now"):
        activity_now(object(), H)


@EVERY_VARIANT
def test_every_measurement_names_the_node_its_gpus_are_on(prometheus_data, variant):
    """The parts per node (dcgm-exporter's Hostname or hostname, kube-state-metrics' node) add up to the whole."""
    url, scenario = prometheus_data
    usage = PrometheusSource(url).hour_usage(scenario.hour(0, variant))
    nodes = {key[-1] for key in [*usage.node_namespaces, *usage.node_capacity]}
    assert nodes == {"node-h100", "node-l40s", "node-a100"}
    for key, whole in usage.namespaces.items():
        parts = [u for (*prefix, _), u in usage.node_namespaces.items() if tuple(prefix) == key]
        for attr in ("allocated_gpu_hours", "used_gpu_hours", "memory_gib_hours", "energy_kwh"):
            assert sum(getattr(p, attr) for p in parts) == pytest.approx(getattr(whole, attr), abs=1e-9), (key, attr)
    for key, whole in usage.capacity.items():
        parts = [c for (*prefix, _), c in usage.node_capacity.items() if tuple(prefix) == key]
        assert (sum(p.capacity for p in parts), sum(p.held for p in parts)) == (
            pytest.approx(whole.capacity, abs=1e-9), pytest.approx(whole.held, abs=1e-9))
    assert {node for (_, _, model, node) in usage.node_namespaces if model == H100} == {"node-h100"}
