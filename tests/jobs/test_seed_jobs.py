"""The demo: seed_demo (with seed_jobs at its end) against two simulating sandboxes leaves a job in every state on
each cluster and something to see for every feature (an idle job, a budget alert, an object the API server
rejected, a rejected request, a preempted job, a waiting job with its reason), and a second run changes nothing."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from billing import devices, metrics
from billing.models import BudgetAlert, CapacityHour, CollectedHour, UsageHour
from billing.selectors import idle_jobs
from composition.demo import usage as sandbox_usage
from jobs.choices import JobState
from jobs.models import Job
from jobs.selectors import why_waiting
from portal import kube
from quotas.choices import RequestState
from quotas.models import QuotaRequest
from tenants.choices import Sharing
from tenants.models import GpuFlavor

pytestmark = pytest.mark.django_db(transaction=True)


def test_seed_demo_leaves_jobs_in_every_state_on_both_clusters():
    from sandbox import Sandbox
    from sandbox.simulator.dra import NVIDIA_MAPPINGS

    dra = {"dra_nodes": 2, "kueue_mappings": NVIDIA_MAPPINGS}  # what `make run` starts them with (--dra-nodes 2)
    with Sandbox(simulate=True, tick=0.05, simulation=dra) as east, \
            Sandbox(simulate=True, tick=0.05, simulation=dra) as west:
        call_command("seed_demo", kueue_url=east.url, volcano_url=west.url, wait=5)
        states = {(job.cluster.name, job.state) for job in Job.objects.select_related("cluster")}
        for cluster in ("gpu-east", "gpu-west"):
            assert {state for name, state in states if name == cluster} == set(JobState.values), cluster
        admin = get_user_model().objects.get(username="admin")
        assert [idle.job.name for idle in idle_jobs(user=admin)] == ["llama-finetune"]
        assert BudgetAlert.objects.filter(budget__team__slug="nlp").exists()
        rejected = Job.objects.get(name="ranker-untrusted")
        assert rejected.sync_state == "rejected" and "not an allowed registry" in rejected.sync_message
        assert QuotaRequest.objects.filter(state=RequestState.REJECTED).exclude(decision_note="").exists()
        assert Job.objects.filter(state=JobState.PREEMPTED).exclude(state_message="").exists()
        waiting = Job.objects.filter(state=JobState.QUEUED, cluster__name="gpu-east").first()
        assert waiting is not None and why_waiting(job=waiting).startswith("Waiting for")
        # On gpu-west the queue lets eval-urgent in once hparam-search is reclaimed, but the A100 nodes are full.
        assert why_waiting(job=Job.objects.get(name="eval-urgent")).startswith(
            "Placement, not quota, is what blocks: Volcano let the job into its queue")
        # A DRA job and a shared-GPU job run on each cluster, each DRA worker holding an allocated claim.
        for name in ("dra-finetune", "mps-inference", "dra-eval", "notebook-shared"):
            job = Job.objects.get(name=name)
            assert job.state == JobState.RUNNING, (name, job.state_message)
        for sandbox, workers in ((east, 2), (west, 1)):
            rt = sandbox.store.kind("resource.k8s.io/v1", "ResourceClaim")
            claims = sandbox.store.list(rt, None)["items"]
            assert len(claims) == workers and all(c["status"]["allocation"] for c in claims)
        # The demo's usage source counts each DRA worker's allocated device under the DRA flavor.
        for cluster, sandbox in (("gpu-east", east), ("gpu-west", west)):
            flavor = GpuFlavor.objects.get(cluster__name=cluster, sharing=Sharing.DRA)
            claims = sandbox.store.list(sandbox.store.kind("resource.k8s.io/v1", "ResourceClaim"), None)["items"]
            allocated = sum(len(c["status"]["allocation"]["devices"]["results"]) for c in claims)
            runs = [r for r in sandbox_usage.cluster_pod_runs(flavor.cluster)
                    if r.resource == devices.flavor_unit(flavor)]
            assert runs and {r.gpu_model for r in runs} == {flavor.gpu_model}, runs
            assert sum(r.gpus for r in runs) == allocated, runs
            usage = sandbox_usage.SandboxSource(lambda runs=runs: runs).hour_usage(metrics.check_hour(
                runs[0].started_at.replace(minute=0, second=0, microsecond=0)))
            assert usage.namespaces[(runs[0].namespace, devices.flavor_unit(flavor), flavor.gpu_model)
                                    ].allocated_gpu_hours > 0
        # Placement on each cluster: a job that may run on spot and a gang kept within one rack, both running;
        # on Kueue the spot job landed on the spot flavor (nlp's reserved H100s are taken) and the job says why.
        for name in ("spot-finetune", "allreduce-bench", "spot-eval", "ring-allreduce"):
            assert Job.objects.get(name=name).state == JobState.RUNNING, name
        assert Job.objects.get(name="spot-finetune").placement["flavors"] == ["h100-spot"]
        domains = Job.objects.get(name="allreduce-bench").placement["domains"]
        assert len(domains) == 1 and "topology.gpu-portal.io/rack" in domains[0], domains
        ring = Job.objects.get(name="ring-allreduce")
        assert ring.topology_level == "rack"
        # On Volcano its gang sits in one rack HyperNode that Volcano's label discoverer built from the nodes.
        assert ring.placement["hypernode"].startswith("hypernode-gpu-portal-tier1-"), ring.placement
        assert list(ring.placement["domains"][0]) == ["topology.gpu-portal.io/rack"], ring.placement
        # The spot pool is counted and priced on its own, told apart from the reserved H100s by its nodes' labels.
        spot = GpuFlavor.objects.get(cluster__name="gpu-east", name="h100-spot")
        assert UsageHour.objects.filter(flavor=spot, team__slug="nlp").exists()
        assert CapacityHour.objects.filter(flavor=spot).exists()
        noted = CollectedHour.objects.filter(cluster=spot.cluster, message__contains="matches")
        assert not noted.exists(), set(noted.values_list("message", flat=True)[:5])
        count = Job.objects.count()
        call_command("seed_demo", kueue_url=east.url, volcano_url=west.url, wait=5)
        assert Job.objects.count() == count
    kube.forget_clients()
