"""What a job's pods ask for in CPU and memory as the schedulers count them (`jobs.pods`), and the scheduler's words
that say CPU or memory is what the quota lacks."""

from decimal import Decimal

import pytest

from jobs import pods


@pytest.mark.parametrize(
    ("kind", "workers", "cpu", "memory", "parts"),
    [
        ("batch", 1, Decimal(8), Decimal(64), "1 worker"),
        ("pytorch", 2, Decimal(16), Decimal(128), "2 workers"),
        # KubeRay's head has the workers' size without GPUs, and its submitter Job 500m CPU and 200Mi.
        ("ray", 1, Decimal("16.5"), Decimal(128) + Decimal(200) / 1024,
         "a Ray head, 1 worker and KubeRay's submitter of 0.5 CPU and 200Mi"),
    ],
)
def test_pod_totals(kind, workers, cpu, memory, parts):
    assert pods.pod_totals(kind=kind, workers=workers, cpu_per_worker=8, memory_gib_per_worker=64) == \
        pods.PodTotals(cpu, memory, parts)


@pytest.mark.parametrize(("value", "text"), [(Decimal(8), "8"), (Decimal("8.5"), "8.5"),
                                              (Decimal(128) + Decimal(200) / 1024, "128.2")])
def test_number(value, text):
    assert pods.number(value) == text


@pytest.mark.parametrize(
    ("message", "resource"),
    [
        ("couldn't assign flavors to pod set submitter: insufficient unused quota for cpu in flavor h100, "
         "500m more needed", "cpu"),
        ("couldn't assign flavors to pod set head: insufficient quota for memory in flavor h100, "
         "previously considered podsets requests (0) + current podset request (64Gi) > maximum capacity (32Gi)",
         "memory"),
        ("queue resource quota insufficient: insufficient cpu", "cpu"),
        ("queue resource quota insufficient: insufficient nvidia.com/gpu", ""),
        ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
         "8 more needed", ""),
        ("", ""),
    ],
)
def test_short_of(message, resource):
    assert pods.short_of(message) == resource
