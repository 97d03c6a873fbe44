"""Topology-required jobs in the forecast, against each topology domain's free GPUs (pure: `jobs.inventory` from
Nodes and Pods as the API server gives them, and the replay of each scheduler): such a job waits until one domain
frees enough, even when the flavor's total would fit, and the estimate says so."""

import gc
from dataclasses import replace

import pytest

from backends.forecast import Queue, Span, Work, World, forecast
from backends.kueue_forecast import KueuePolicy
from backends.volcano_forecast import VolcanoPolicy
from jobs import estimates, inventory

NOW = 1_000_000.0
POLICIES = {"kueue": KueuePolicy, "volcano": VolcanoPolicy}
LEVELS = [{"name": "rack", "node_label": "example.com/rack"}, {"name": "host", "node_label": "kubernetes.io/hostname"}]
H100 = inventory.FlavorNodes("h100", "nvidia.com/gpu", {"example.com/pool": "reserved"})


def node(name, rack, gpus=8, pool="reserved", **spec):
    return {"metadata": {"name": name, "labels": {"example.com/rack": rack, "kubernetes.io/hostname": name,
                                                  "example.com/pool": pool}},
            "spec": spec, "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "128"}}}


def pod(on, gpus, job=None, phase="Running"):
    labels = {"gpu-portal.io/job": str(job)} if job is not None else {}
    return {"metadata": {"labels": labels}, "spec": {"nodeName": on, "containers": [
        {"resources": {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": phase}}


def exact(seconds):
    return Span(seconds, seconds, seconds, "history", "")


def running(key, units, ends_in, held=(), level="", domain=""):
    return Work(key, "a", "h100", units, 0, (NOW - 100, key), exact(100 + ends_in), name=f"job-{key}",
                started=NOW - 100, held=held, level=level, domain=domain)


def waiting(key, units, level="rack"):
    return Work(key, "a", "h100", units, 0, (NOW - 10, key), exact(600), name=f"job-{key}", level=level)


def test_the_inventory_counts_each_domains_gpus_and_where_the_running_jobs_are():
    nodes = [node("n1", "r1"), node("n2", "r1"), node("n3", "r2"), node("n4", "r2", unschedulable=True),
             node("s1", "s1", pool="spot")]
    pods = [pod("n1", 8, job=1), pod("n3", 4, job=2), pod("n3", 2), pod("n2", 8, job=9, phase="Succeeded"),
            pod("n2", 1, job=77)]  # 77: a job the forecast does not replay (ended for the portal)
    found = inventory.domain_inventory(nodes=nodes, pods=pods, flavors=[H100], levels=LEVELS, running={1, 2})
    assert found.sizes[("h100", "rack")] == {"r1": 15, "r2": 6}  # n4 cordoned, s1 another flavor's; 2 + 1 taken
    assert found.sizes[("h100", "host")] == {"n1": 8, "n2": 7, "n3": 6}
    assert found.held == {1: (("host", "n1", 8), ("rack", "r1", 8)), 2: (("host", "n3", 4), ("rack", "r2", 4))}
    free = inventory.most_free(found.sizes, [running(1, 8, 100, held=found.held[1]),
                                             running(2, 4, 100, held=found.held[2])])
    assert free == {("h100", "rack"): 7, ("h100", "host"): 7}


@pytest.mark.parametrize("backend", POLICIES)
def test_a_rack_bound_job_waits_for_one_rack_with_room_even_when_the_flavor_total_fits(backend):
    world = World(queues={"a": Queue("a", "", {"h100": 32}, {})}, capacity={"h100": 32},
                  domains={("h100", "rack"): {"r1": 16, "r2": 16}})
    works = [running(1, 8, ends_in=300, held=(("rack", "r1", 8),)),  # jobs kept to no rack, where their pods are
             running(2, 8, ends_in=600, held=(("rack", "r2", 8),)), waiting(3, 16)]
    result = forecast(world, works, POLICIES[backend](), NOW)
    assert result[3].start[1] - NOW == 300 and result[3].freed_by == 1  # 16 free at once, in no one rack till then
    flavor_total = forecast(World(queues=world.queues, capacity=world.capacity), works, POLICIES[backend](), NOW)
    assert flavor_total[3].start[1] == NOW  # what the forecast said before it knew the racks
    spread = [running(1, 8, ends_in=300, held=(("rack", "r1", 4), ("rack", "r2", 4))),
              running(2, 8, ends_in=600, held=(("rack", "r1", 4), ("rack", "r2", 4))), waiting(3, 16)]
    assert forecast(world, spread, POLICIES[backend](), NOW)[3].start[1] - NOW == 600  # 12 per rack at 300


@pytest.mark.parametrize("backend", POLICIES)
def test_a_rack_bound_job_that_starts_in_the_replay_takes_its_rack_from_the_next(backend):
    world = World(queues={"a": Queue("a", "", {"h100": 32}, {})}, capacity={"h100": 32},
                  domains={("h100", "rack"): {"r1": 16, "r2": 16}})
    works = [running(1, 8, ends_in=300, held=(("rack", "r1", 8),)), waiting(3, 16), waiting(4, 16)]
    result = forecast(world, works, POLICIES[backend](), NOW)
    assert result[3].start[1] == NOW  # r2 is free
    assert result[4].start[1] - NOW == 300  # r1 frees when job 1 ends; r2 is job 3's till 600


def test_the_sentence_says_no_domain_has_room_and_whose_end_makes_it():
    works = {1: running(1, 8, ends_in=300, held=(("rack", "r1", 8),)), 3: waiting(3, 16)}
    world = World(queues={"a": Queue("a", "", {"h100": 32}, {})}, capacity={"h100": 32},
                  domains={("h100", "rack"): {"r1": 16, "r2": 8}})
    result = forecast(world, list(works.values()), KueuePolicy(), NOW)
    free = inventory.most_free(world.domains, list(works.values()))
    said = estimates.document(result[3], works, NOW, free)
    assert "it needs 16 h100 in one rack, and no rack has more than 8 free, and 8 h100 free up when job-1 ends" \
        in said["sentence"]
    assert said["basis"]["domain"] == {"level": "rack", "needs": 16, "most_free": 8}


@pytest.mark.parametrize("backend", POLICIES)
def test_a_thousand_waiting_jobs_a_third_of_them_rack_bound_are_forecast_well_under_a_second(backend):
    import random
    import time

    rng = random.Random(7)
    teams = [f"t{i}" for i in range(8)]
    racks = {"h100": [f"h{i}" for i in range(16)], "a100": [f"a{i}" for i in range(8)]}
    world = World(queues={t: Queue(t, "pool", {"h100": 32, "a100": 16}, {"h100": 32, "a100": 16}) for t in teams},
                  capacity={"h100": 256, "a100": 128},
                  domains={(flavor, "rack"): {name: 16 for name in names} for flavor, names in racks.items()})
    works = []
    for i in range(60):
        flavor, units = rng.choice(["h100", "a100"]), rng.choice([1, 2, 4, 8])
        works.append(replace(running(i, units, rng.uniform(60, 7200), held=(("rack", rng.choice(racks[flavor]),
                                                                                units),)),
                             queue=rng.choice(teams), flavor=flavor))
    works += [replace(waiting(100 + i, rng.choice([1, 2, 4, 8, 16]), level=rng.choice(["rack", "", ""])),
                      queue=rng.choice(teams), flavor=rng.choice(["h100", "a100"]), priority=rng.choice([0, 0, 10]),
                      span=Span(*[rng.uniform(300, 4 * 3600)] * 3))
              for i in range(1000)]
    policy = POLICIES[backend]()
    if backend == "volcano":  # as the portal configures Volcano: the capacity plugin, reclaim, no preempt
        policy = VolcanoPolicy(capacity_plugin=True)
        world = replace(world, preempt=False, reclaim=True, fair=True)
    gc.collect()  # the garbage earlier tests left is not this code's cost
    started = time.process_time()
    result = forecast(world, works, policy, NOW)
    spent = time.process_time() - started
    assert all(result[w.key].start for w in works if not w.running)
    assert spent < 2.0, f"{spent:.2f} s of CPU (the bench measures it on a quiet machine)"
