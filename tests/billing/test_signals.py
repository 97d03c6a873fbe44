"""The H200 probe's samples through a real Prometheus (tests/billing/h200.py): each hour is read from the best
activity field its exporter reports all hour, under both scrape setups; tiny kernels read idle on SM activity and
busy, marked as the weaker signal, on the time-based ones; memory held reads idle under every signal; a cluster that
turns SM activity on switches at the first whole hour, and its statement says so."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest

from billing import activity, selectors, services
from billing.metrics import PrometheusSource
from billing.models import CollectedHour, JobUsageHour, UsageHour
from jobs.choices import JobState
from jobs.models import Job
from tests import prometheus
from tests.billing.h200 import (
    GPU_UTIL,
    H200,
    HOURS,
    JOB_OF,
    PHASES,
    SHAPES,
    SIGNAL_BY_HOUR,
    SM_ACTIVE,
    H200Scenario,
    read_phases,
    samples_path,
)
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    PriorityTierFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UserFactory,
)
from tests.requires import unavailable

EVERY_SHAPE = pytest.mark.parametrize("shape", range(len(SHAPES)), ids=SHAPES)
THRESHOLD = 0.05


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    """(Prometheus URL, scenario); the hours end before this month starts, so one month holds them all."""
    phases = read_phases(samples_path())
    if prometheus.binaries() is None:
        unavailable("prometheus/promtool are not installed (Debian package 'prometheus'): the signal tests need a "
                    "real Prometheus")
    now = datetime.now(UTC)
    scenario = H200Scenario(base=datetime(now.year, now.month, 1, tzinfo=UTC) - timedelta(hours=HOURS * len(SHAPES)),
                            phases=phases)
    path = tmp_path_factory.mktemp("h200") / "series.om.txt"
    prometheus.write_openmetrics(path, scenario.families())
    with prometheus.prometheus_server(path) as url:
        yield url, scenario


@pytest.fixture
def world(h200, db):
    url, scenario = h200
    cluster = ClusterFactory(name="h200-test", usage_source__prometheus_url=url)
    flavor = GpuFlavorFactory(cluster=cluster, name="h200", gpu_model=H200)
    team = TeamFactory(slug="alpha")
    TeamNamespaceFactory(team=team, cluster=cluster)
    user, tier = UserFactory(), PriorityTierFactory()
    for phase, pk in JOB_OF.items():
        Job.objects.create(pk=pk, team=team, cluster=cluster, flavor=flavor, priority_tier=tier, kind="batch",
                           name=phase.replace("_", "-"), image="ghcr.io/acme/probe:1", submitted_by=user,
                           state=JobState.RUNNING)
    return {"cluster": cluster, "team": team, "scenario": scenario, "url": url}


@EVERY_SHAPE
def test_each_hour_is_read_from_the_best_field_exported_all_hour_within_half_a_percent(h200, shape):
    url, scenario = h200
    source = PrometheusSource(url)
    for index in range(HOURS):
        usage = source.hour_usage(scenario.hour(index, shape))
        signal = SIGNAL_BY_HOUR[index]
        assert usage.signal == signal, index
        assert usage.problems == []
        for phase in PHASES:
            job = usage.jobs[("alpha", str(JOB_OF[phase]))]
            truth = scenario.used_truth(phase, index, signal)
            assert job.allocated_gpu_hours == pytest.approx(1.0)
            assert abs(job.used_gpu_hours - truth) <= 0.005 * truth + 1e-6, (index, phase)
            assert job.memory_gib_hours == pytest.approx(scenario.memory_truth(phase, index), rel=1e-4)
        namespace = usage.namespaces[("alpha", "nvidia_com_gpu", H200)]
        truth = sum(scenario.used_truth(phase, index, signal) for phase in PHASES)
        assert abs(namespace.used_gpu_hours - truth) <= 0.005 * truth
        # SM activity per job is read only in the hour it covers whole; the exporter reports no tensor pipe here.
        assert (job.sm_active_gpu_hours > 0) == (signal == SM_ACTIVE)


def _verdicts(cluster, hour) -> dict[str, activity.Verdict]:
    rows = JobUsageHour.objects.filter(job__cluster=cluster, hour=hour).select_related("job")
    return {row.job.name.replace("-", "_"): activity.judge_idle(
        signal=row.utilisation_signal, utilisation=row.utilisation_avg, memory_gib=row.gpu_memory_used_gib_avg,
        threshold=THRESHOLD) for row in rows}


@EVERY_SHAPE
def test_tiny_kernels_read_idle_on_sm_activity_and_busy_marked_weaker_on_the_time_based_signals(world, shape):
    cluster, scenario = world["cluster"], world["scenario"]
    for index in range(HOURS):
        services.usage_collect_hour(cluster=cluster, hour=scenario.hour(index, shape))
        tiny = _verdicts(cluster, scenario.hour(index, shape))["tiny_kernels"]
        if SIGNAL_BY_HOUR[index] == SM_ACTIVE:
            assert tiny.idle and tiny.caveat == "", tiny
        else:
            assert not tiny.idle and tiny.caveat == activity.TINY_KERNELS, (index, tiny)
            assert "(time-based)" in tiny.reason


@EVERY_SHAPE
def test_memory_held_with_no_kernels_reads_idle_under_every_signal(world, shape):
    cluster, scenario = world["cluster"], world["scenario"]
    for index in range(HOURS):
        services.usage_collect_hour(cluster=cluster, hour=scenario.hour(index, shape))
        verdicts = _verdicts(cluster, scenario.hour(index, shape))
        held = verdicts["memory_held_idle"]
        assert held.idle and held.reason.startswith("holds 41.5 GiB of memory per GPU but does no work"), (index, held)
        assert verdicts["idle"].idle
        assert not verdicts["heavy_full"].idle and not verdicts["heavy_10pct_duty"].idle


def test_the_idle_finder_judges_by_the_signal_of_each_hour(world, settings, django_user_model):
    cluster, scenario = world["cluster"], world["scenario"]
    for index in range(HOURS):
        services.usage_collect_hour(cluster=cluster, hour=scenario.hour(index, 1))
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    now = scenario.hour(HOURS, 1) + timedelta(minutes=5)

    settings.IDLE_GPU_WINDOW_HOURS = 1  # the last hour only, on SM activity: tiny kernels are no work
    assert {i.job.name for i in selectors.idle_jobs(user=admin, now=now)} == {
        "idle", "memory-held-idle", "tiny-kernels"}
    settings.IDLE_GPU_WINDOW_HOURS = 2  # one hour on graphics engine activity: they read busy then
    found = {i.job.name: i for i in selectors.idle_jobs(user=admin, now=now)}
    assert set(found) == {"idle", "memory-held-idle"}
    assert found["memory-held-idle"].signal == activity.GR_ENGINE_ACTIVE
    assert "holds 41.5 GiB" in found["memory-held-idle"].verdict.reason
    # The cluster's newest hour is read from SM activity, so no caveat is owed for it.
    assert selectors.idle_report(user=admin, now=now).time_based_clusters == []


def test_a_cluster_turning_sm_activity_on_switches_at_that_hour_and_the_statement_says_so(world):
    cluster, scenario, team = world["cluster"], world["scenario"], world["team"]
    hours = [scenario.hour(index, 0) for index in range(HOURS)]
    services.usage_collect_hours(cluster=cluster, hours=hours)

    signals = dict(UsageHour.objects.filter(cluster=cluster).values_list("hour", "utilisation_signal"))
    assert [signals[h] for h in hours] == list(SIGNAL_BY_HOUR)
    ledger = {c.hour: c for c in CollectedHour.objects.filter(cluster=cluster)}
    assert ledger[hours[2]].utilisation_signal == activity.GR_ENGINE_ACTIVE  # SM activity from minute 20 only
    assert SM_ACTIVE in ledger[hours[3]].activity_fields and SM_ACTIVE not in ledger[hours[2]].activity_fields

    month = selectors.current_month(hours[0])
    statement = selectors.team_statement(team=team, month=month)
    assert statement.signal_changed
    assert [(s.signal, s.start, s.end) for s in statement.signals] == [
        (GPU_UTIL, hours[0], hours[1]), (activity.GR_ENGINE_ACTIVE, hours[1], hours[3]),
        (SM_ACTIVE, hours[3], hours[3] + timedelta(hours=1))]
    (line,) = statement.lines
    stream = io.StringIO()
    selectors.write_focus_csv([statement], stream)
    (row,) = csv.DictReader(io.StringIO(stream.getvalue()))
    assert row["x_UtilisationSignal"] == line.utilisation_signal == (
        f"{GPU_UTIL} {hours[0]:%Y-%m-%dT%H:00:00Z}/{hours[1]:%Y-%m-%dT%H:00:00Z}; "
        f"DCGM_FI_PROF_GR_ENGINE_ACTIVE {hours[1]:%Y-%m-%dT%H:00:00Z}/{hours[3]:%Y-%m-%dT%H:00:00Z}; "
        f"{SM_ACTIVE} {hours[3]:%Y-%m-%dT%H:00:00Z}/{hours[3] + timedelta(hours=1):%Y-%m-%dT%H:00:00Z}")
    document = selectors.statement_json(statement)
    assert [s["signal"] for s in document["utilisation_signals"]] == [GPU_UTIL, activity.GR_ENGINE_ACTIVE, SM_ACTIVE]
    assert [s["time_based"] for s in document["lines"][0]["utilisation_signals"]] == [True, True, False]

    # A statement of the hours after the switch names one signal.
    UsageHour.objects.filter(hour__lt=hours[3]).delete()
    after = selectors.team_statement(team=team, month=month)
    assert not after.signal_changed and after.lines[0].utilisation_signal == SM_ACTIVE
