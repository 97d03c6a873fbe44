"""Jobs named before object names became DNS-1035 labels of at most 47 characters keep the names their objects
already have in the cluster (the status sync finds them by it); the others derive it as before."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from jobs.models import Job
from tests.factories import ClusterFactory, GpuFlavorFactory, PriorityTierFactory, TeamFactory, UserFactory

BEFORE = [("jobs", "0002_job_team_newest_first_index")]


@pytest.mark.django_db(transaction=True)
def test_names_given_under_the_earlier_rule_are_kept():
    cluster = ClusterFactory()
    flavor, team = GpuFlavorFactory(cluster=cluster), TeamFactory()
    tier, user = PriorityTierFactory(), UserFactory()
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    OldJob = executor.loader.project_state(BEFORE).apps.get_model("jobs", "Job")
    common = dict(team_id=team.pk, cluster_id=cluster.pk, flavor_id=flavor.pk, priority_tier_id=tier.pk,
                  submitted_by_id=user.pk, kind="batch", image="x/y:1")
    plain = OldJob.objects.create(name="train", **common)
    digit = OldJob.objects.create(name="1st-run", **common)
    long = OldJob.objects.create(name="a" * 40, id=10_000_000, **common)
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    # Forward through the data migration to every app's latest state, which the current model (and later tests) expect.
    executor.migrate(executor.loader.graph.leaf_nodes())
    jobs = {job.pk: job for job in Job.objects.all()}
    assert jobs[plain.pk].kept_object_name == "" and jobs[plain.pk].object_name == f"train-{plain.pk}"
    assert jobs[digit.pk].object_name == f"1st-run-{digit.pk}" == jobs[digit.pk].kept_object_name
    assert jobs[long.pk].object_name == "a" * 40 + "-10000000"  # 49 characters: the earlier limit was 52
