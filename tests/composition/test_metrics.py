"""`/metrics`: requests and errors per view, task outcomes, the reconcile backlog and retries per cluster, watcher
lag, and the health of the broker and each cluster, in Prometheus's text format (parsed back here)."""

import pytest
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from portal import metrics
from tests.factories import ClusterFactory, TeamFactory, TeamNamespaceFactory

pytestmark = pytest.mark.django_db


def scrape(client, **headers) -> dict:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_requests_per_view_backlog_retries_and_health(client):
    cluster = ClusterFactory(name="east", generation=1, observed_generation=1)
    TeamNamespaceFactory(team=TeamFactory(slug="nlp"), cluster=cluster, generation=3, observed_generation=2,
                         attempts=2, next_attempt_at="2030-01-01T00:00:00Z")
    TeamNamespaceFactory(team=TeamFactory(slug="cv"), cluster=cluster, generation=1, observed_generation=1)
    client.get("/healthz")
    client.get("/no-such-page/")
    metrics.task_outcome("composition.tasks.reconcile_due_task", "succeeded")
    metrics.watcher_flushed("east")
    samples = scrape(client)
    assert samples[("gpu_portal_http_requests_total", (("method", "GET"), ("status", "2xx"), ("view", "healthz")))] >= 1
    assert samples[("gpu_portal_http_requests_total", (("method", "GET"), ("status", "4xx"),
                                                       ("view", "unresolved")))] >= 1
    assert ("gpu_portal_http_request_duration_seconds_count", (("method", "GET"), ("view", "healthz"))) in samples
    assert samples[("gpu_portal_reconcile_backlog", (("cluster", "east"),))] == 1
    assert samples[("gpu_portal_reconcile_retrying", (("cluster", "east"),))] == 1
    assert samples[("gpu_portal_reconcile_attempts", (("cluster", "east"),))] == 2
    assert samples[("gpu_portal_celery_tasks_total", (("outcome", "succeeded"),
                                                      ("task", "composition.tasks.reconcile_due_task")))] >= 1
    assert 0 <= samples[("gpu_portal_watcher_lag_seconds", (("cluster", "east"),))] < 60
    # Nothing listens where the factory's cluster points: reported down here, while /readyz stays ready.
    assert samples[("gpu_portal_dependency_up", (("dependency", "cluster:east"),))] == 0
    assert client.get("/readyz").status_code == 200


@override_settings(METRICS_TOKEN="s3cret")
def test_a_metrics_token_restricts_the_scrape(client):
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    scrape(client, HTTP_AUTHORIZATION="Bearer s3cret")
