"""The demo: seed_demo (with seed_jobs at its end) against two simulating sandboxes leaves a job in every state on
each cluster, and a second run changes nothing."""

import pytest
from django.core.management import call_command

from jobs.choices import JobState
from jobs.models import Job
from portal import kube

pytestmark = pytest.mark.django_db(transaction=True)


def test_seed_demo_leaves_jobs_in_every_state_on_both_clusters():
    from sandbox import Sandbox

    with Sandbox(simulate=True, tick=0.05) as east, Sandbox(simulate=True, tick=0.05) as west:
        call_command("seed_demo", kueue_url=east.url, volcano_url=west.url, wait=5)
        states = {(job.cluster.name, job.state) for job in Job.objects.select_related("cluster")}
        for cluster in ("gpu-east", "gpu-west"):
            assert {state for name, state in states if name == cluster} == set(JobState.values), cluster
        count = Job.objects.count()
        call_command("seed_demo", kueue_url=east.url, volcano_url=west.url, wait=5)
        assert Job.objects.count() == count
    kube.forget_clients()
