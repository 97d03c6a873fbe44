"""Kueue's admission fair sharing arithmetic (`backends.kueue_fairshare`) against hand-computed figures, and the
replay of recorded usage checked against the sandbox's Kueue running the same usage."""

import math

import pytest
import yaml

from backends import kueue_fairshare as afs
from sandbox import Sandbox
from sandbox.tests.test_scheduling_scenarios import flavors, gpu_group, gpu_job
from sandbox.tests.test_simulator import KUEUE, T0, create, get, kueue_state, step

GPU = "nvidia.com/gpu"
HOUR = 3600.0


@pytest.mark.parametrize(("text", "seconds"), [
    ("168h", 604800.0), ("5m", 300.0), ("1h30m", 5400.0), ("5m0s", 300.0), ("0s", 0.0), ("0", 0.0),
    ("1.5h", 5400.0), ("250ms", 0.25),
])
def test_go_durations(text, seconds):
    assert afs.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["7d", "1 h", "h", "5mm", "-"])
def test_bad_durations_are_refused(text):
    with pytest.raises(ValueError, match="not a duration"):
        afs.parse_duration(text)


def test_settings_take_upstream_defaults_and_refuse_what_kueue_refuses():
    assert afs.settings_from({}) is None  # no block: the feature is off
    assert afs.settings_from({"admissionFairSharing": {}}) == afs.Settings(half_life=0.0, sampling=300.0)
    assert not afs.Settings().decays  # the default half-life of 0 keeps nothing
    parsed = afs.settings_from({"admissionFairSharing": {"usageHalfLifeTime": "168h", "usageSamplingInterval": "1m",
                                                         "resourceWeights": {"cpu": 0}}})
    assert parsed == afs.Settings(half_life=604800.0, sampling=60.0, resource_weights={"cpu": 0.0})
    with pytest.raises(ValueError, match="resourceWeights\\[cpu\\] must not be negative"):
        afs.settings_from({"admissionFairSharing": {"resourceWeights": {"cpu": -1}}})
    with pytest.raises(ValueError, match="usageHalfLifeTime must not be negative"):
        afs.settings_from({"admissionFairSharing": {"usageHalfLifeTime": "-1h"}})
    assert afs.format_duration(5400) == "1h30m" and afs.format_duration(0) == "0s"


def test_decay_by_hand():
    """α = 1 − 0.5^(elapsed ÷ half-life): a half-life's worth of time weighs the new sample ½, and 0 keeps none."""
    assert afs.alpha(HOUR, HOUR) == 0.5
    assert afs.alpha(300, HOUR) == pytest.approx(0.0561256873183065, abs=1e-15)
    assert afs.alpha(300, 0) == 0.0
    assert afs.sample({GPU: 8.0}, {GPU: 0.0}, HOUR, HOUR) == {GPU: 4.0}
    assert afs.sample({GPU: 2.0}, {GPU: 6.0, "cpu": 4.0}, HOUR, HOUR) == {GPU: 4.0, "cpu": 2.0}
    assert afs.sample({GPU: 8.0}, {GPU: 4.0}, HOUR, 0) == {}  # the controller resets with a half-life of 0
    # Twelve 5-minute samples of a constant 4 equal one sample of an hour: 4 × (1 − 0.5^1) = 2.
    consumed: dict = {}
    for _ in range(12):
        consumed = afs.sample(consumed, {GPU: 4.0}, 300, HOUR)
    assert consumed[GPU] == pytest.approx(2.0, abs=1e-12)


def test_usage_is_weighted_by_resource_and_divided_by_the_queue_weight():
    consumed = {GPU: 6.0, "cpu": 10.0}
    assert afs.usage(consumed, 1) == 16.0
    assert afs.usage(consumed, 2, {"cpu": 0}) == 3.0
    assert afs.usage(consumed, 1, {"cpu": 0}, penalty={GPU: 0.5}) == 6.5
    assert afs.usage(consumed, 0) == math.inf
    assert afs.entry_penalty({GPU: 4.0}, afs.Settings(half_life=300.0)) == {GPU: 2.0}


def test_order_and_share():
    usages = {"vision": 3.0, "speech": 1.0, "nlp": 1.0, "idle": math.inf}
    assert afs.order(usages) == ["nlp", "speech", "vision", "idle"]
    assert afs.shares(usages) == {"vision": 0.6, "speech": 0.2, "nlp": 0.2, "idle": 0.0}


def test_replay_by_hand():
    """Half-life 1 h, samples every 30 min. vision holds 4 GPUs in hour 0 and nothing in hour 1: after hour 0,
    4 × (1 − 0.5) = 2; after hour 1, 1. speech holds 2 GPUs in hour 1 only: 1. With weight 2 for vision the
    order is vision (0.5) then speech (1)."""
    settings = afs.Settings(half_life=HOUR, sampling=1800.0)
    hours = afs.by_queue([("vision", T0, GPU, 4.0), ("speech", T0 + HOUR, GPU, 2.0)])
    replayed = afs.replay(hours, {"vision": 2}, settings, start=T0, end=T0 + 2 * HOUR)
    assert replayed.consumed["vision"][GPU] == pytest.approx(1.0)
    assert replayed.consumed["speech"][GPU] == pytest.approx(1.0)
    assert replayed.usage == pytest.approx({"vision": 0.5, "speech": 1.0})
    assert replayed.order == ["vision", "speech"]
    assert replayed.share == pytest.approx({"vision": 1 / 3, "speech": 2 / 3})
    # The series: each hour's last sample, vision's usage ÷ its weight of 2.
    assert [t for t, _ in replayed.series["vision"]] == [T0 + 1800, T0 + HOUR + 1800]
    assert [v for _, v in replayed.series["vision"]] == pytest.approx([1.0, 0.5])


# --- the replay against the sandbox --------------------------------------------------------------------------

HISTORY = {  # hour index → GPUs each team's LocalQueue holds that hour
    0: {"team-a": 4, "team-b": 0},
    1: {"team-a": 2, "team-b": 2},
    2: {"team-a": 0, "team-b": 1},
    3: {"team-a": 3, "team-b": 0},
}


@pytest.mark.parametrize(("weights", "half_life"), [({"team-a": 1, "team-b": 1}, "2h"),
                                                    ({"team-a": 4, "team-b": 1}, "2h"),
                                                    ({"team-a": 1, "team-b": 3}, "30m")])
def test_replay_agrees_with_the_sandbox(weights, half_life):
    """The same hours of usage run through the sandbox's Kueue (jobs holding the GPUs for each hour, sampled every
    5 minutes) and replayed from hourly rows: the same consumed resources within rounding, and the same order,
    which the ClusterQueue then follows when both teams ask for all its GPUs."""
    settings = afs.Settings(half_life=afs.parse_duration(half_life), sampling=300.0)
    with Sandbox(simulate=True, tick=None, simulation={"duration": 10**6, "startup": 0}) as sb:
        for name in ("team-a", "team-b", "kueue-system"):
            create(sb, "v1", "Namespace", {"metadata": {"name": name}})
        create(sb, "v1", "ConfigMap", {"metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                                       "data": {"controller_manager_config.yaml": yaml.safe_dump({
                                           "admissionFairSharing": {"usageHalfLifeTime": half_life,
                                                                    "usageSamplingInterval": "5m"}})}})
        flavors(sb, "h100")
        create(sb, KUEUE, "ClusterQueue", {"metadata": {"name": "shared"}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [gpu_group(4)],
            "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}}})
        for team, weight in weights.items():
            spec = {"clusterQueue": "shared", "fairSharing": {"weight": str(weight)}}
            create(sb, KUEUE, "LocalQueue", {"metadata": {"name": "default", "namespace": team}, "spec": spec})
        step(sb, -300)  # the LocalQueues are seen (seeded) before the first hour
        for hour, held in HISTORY.items():
            for team, gpus in held.items():
                if gpus:
                    gpu_job(sb, team, f"h{hour}", gpus)
            for t in range(0, 3600, 300):
                step(sb, hour * 3600 + t)
                for team, gpus in held.items():
                    assert not gpus or kueue_state(sb, team, f"h{hour}") == "admitted"
            for team, gpus in held.items():
                if gpus:
                    sb.store.delete(sb.store.kind("batch/v1", "Job"), team, f"h{hour}")
        end = len(HISTORY) * 3600 - 300
        sandbox_consumed = {}
        for team in weights:
            status = get(sb, KUEUE, "LocalQueue", team, "default")["status"]["fairSharing"][
                "admissionFairSharingStatus"]
            value = status["consumedResources"].get(GPU, "0")
            sandbox_consumed[team] = float(value.removesuffix("n")) / 1e9 if value.endswith("n") else float(value)

        rows = [(team, T0 + hour * 3600, GPU, float(gpus)) for hour, held in HISTORY.items()
                for team, gpus in held.items() if gpus]
        replayed = afs.replay(afs.by_queue(rows), weights, settings, start=T0, end=T0 + end + 300)
        for team in weights:
            assert replayed.consumed[team].get(GPU, 0.0) == pytest.approx(sandbox_consumed[team], abs=1e-6)

        # Both teams now ask for all 4 GPUs, team-a first: the ClusterQueue serves the replay's first.
        gpu_job(sb, "team-a", "next", 4)
        gpu_job(sb, "team-b", "next", 4)
        step(sb, end + 1)
        admitted = [team for team in ("team-a", "team-b") if kueue_state(sb, team, "next") == "admitted"]
        assert admitted == replayed.order[:1]
