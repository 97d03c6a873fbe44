"""Workspaces against a sandbox that runs them, on Kueue and on Volcano: started from the service with its volume,
Service and way in; idle GPUs warn it, then suspend it (quota given back, volume kept); resume queues it again
with the same volume; delete removes everything. E-mails go to Django's locmem outbox."""

from datetime import timedelta

import pytest
import requests
from django.utils import timezone

from composition.demo.usage import ACTIVITY_ANNOTATION
from jobs import sync as job_sync
from jobs.choices import JobState
from portal import kube, outbound
from tenants import webhooks
from tenants.choices import Role
from tests.factories import MembershipFactory
from tests.jobs.conftest import T0, build_world
from tests.webhook_receiver import Receiver
from workspaces import culling, selectors, services
from workspaces.choices import Stage
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db
BACKENDS = ["kueue", "volcano"]


@pytest.fixture
def sandbox():
    """A sandbox whose runs never finish by themselves (a workspace runs until it is stopped)."""
    from sandbox import Sandbox

    with Sandbox(simulate=True, tick=None, simulation={"duration": 10**7, "startup": 5}) as sb:
        yield sb
    kube.forget_clients()


@pytest.fixture
def stages(settings):
    settings.WORKSPACE_WARN_MINUTES = 10
    settings.WORKSPACE_SUSPEND_MINUTES = 5
    settings.WORKSPACE_VOLUME_DAYS = 1
    settings.WORKSPACE_IDLE_THRESHOLD = 0.05


def step(sb, seconds):
    sb.simulator.step(T0 + seconds)


def objects(world, kind, api="v1"):
    client = kube.client_for_cluster(world["cluster"])
    return {o["metadata"]["name"]: o for o in client.list(api, kind, namespace="nlp")}


def run_pods(world, workspace):
    client = kube.client_for_cluster(world["cluster"])
    return client.list("v1", "Pod", namespace="nlp", label_selector=f"gpu-portal.io/job={workspace.run_id}")


def set_activity(world, workspace, doing):
    """What `kubectl annotate pod` does: a merge patch of the pod's annotations."""
    for pod in run_pods(world, workspace):
        answer = requests.patch(f"{world['cluster'].server}/api/v1/namespaces/nlp/pods/{pod['metadata']['name']}",
                                json={"metadata": {"annotations": {ACTIVITY_ANNOTATION: doing}}},
                                headers={"Content-Type": "application/merge-patch+json"}, timeout=10)
        assert answer.status_code == 200, answer.text


def start(world, run_on_commit, settings, **overrides):
    fields = dict(actor=world["member"], team=world["team"], flavor=world["flavor"], name="nb", tool="jupyterlab",
                  image=settings.WORKSPACE_IMAGES["jupyterlab"][0], gpus=8, cpu=4, memory_gib=32, volume_gib=20)
    fields.update(overrides)
    with run_on_commit():
        return services.workspace_create(**fields)


def sync(world, run_on_commit):
    with run_on_commit():
        job_sync.job_status_sync(cluster=world["cluster"])


def cull(run_on_commit, now):
    with run_on_commit():
        return culling.workspace_cull_all(now=now)


@pytest.fixture
def receiver(settings):
    """The team's webhook receiver: a real HTTP server on loopback, allowed by the platform setting."""
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    with Receiver() as found:
        yield found


def hooked(world, receiver) -> str:
    admin = MembershipFactory(team=world["team"], role=Role.ADMIN).user
    return webhooks.team_webhook_set(actor=admin, team=world["team"], url=receiver.url)[1]


def signed(call, secret) -> bool:
    stamp = call["headers"][webhooks.TIMESTAMP_HEADER]
    return call["headers"][webhooks.SIGNATURE_HEADER] == f"sha256={outbound.sign(secret, stamp, call['body'])}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_start_idle_warn_suspend_resume_delete(sandbox, run_on_commit, settings, stages, mailoutbox, receiver,
                                               backend):
    world = build_world(sandbox.url, backend, guaranteed=8, burst=0)
    secret = hooked(world, receiver)
    workspace, token = start(world, run_on_commit, settings)
    assert len(token) >= 40 and token not in workspace.access_hash
    claim = objects(world, "PersistentVolumeClaim")[workspace.volume_name]
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    service = objects(world, "Service")[workspace.object_name]
    assert service["spec"]["selector"] == {"gpu-portal.io/job": str(workspace.run_id)}

    step(sandbox, 0)
    step(sandbox, 10)
    sync(world, run_on_commit)
    workspace.refresh_from_db()
    assert workspace.run.state == JobState.RUNNING
    (pod,) = run_pods(world, workspace)
    container = pod["spec"]["containers"][0]
    assert container["volumeMounts"] == [{"name": "home", "mountPath": "/home/jovyan"}]
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == workspace.volume_name
    assert token not in str(pod)  # only its hash reaches the cluster
    way = selectors.way_in(workspace)
    assert way["port_forward"] == f"kubectl -n nlp port-forward service/{workspace.object_name} 8888:8888"

    # Busy GPUs: nothing happens however long.
    now = timezone.now()
    set_activity(world, workspace, "busy")
    assert cull(run_on_commit, now)["read"] == 1
    assert cull(run_on_commit, now + timedelta(minutes=30))["moved"] == {}
    # Idle: warned after 10 minutes, with an e-mail.
    set_activity(world, workspace, "idle")
    cull(run_on_commit, now + timedelta(minutes=31))
    assert cull(run_on_commit, now + timedelta(minutes=42))["moved"] == {workspace.pk: Stage.WARNED}
    assert [m.subject for m in mailoutbox] == ["Workspace nb warned"]
    # Still idle 5 minutes after the warning: suspended; its quota goes back, its volume stays.
    assert cull(run_on_commit, now + timedelta(minutes=48))["moved"] == {workspace.pk: Stage.SUSPENDED}
    workspace.refresh_from_db()
    assert workspace.stage == Stage.SUSPENDED
    assert [m.subject for m in mailoutbox][-1] == "Workspace nb suspended"
    step(sandbox, 15)
    sync(world, run_on_commit)
    assert run_pods(world, workspace) == []
    assert Workspace.objects.get(pk=workspace.pk).run.state == JobState.CANCELLED
    assert workspace.volume_name in objects(world, "PersistentVolumeClaim")
    assert workspace.object_name not in objects(world, "Service")
    # The quota it held is free: a job of 8 GPUs is admitted.
    from tests.jobs.test_simulated import submit
    other = submit(world, run_on_commit, kind="batch", name="other", workers=1, gpus_per_worker=8)
    step(sandbox, 20)
    sync(world, run_on_commit)
    other.refresh_from_db()
    assert other.state in (JobState.ADMITTED, JobState.RUNNING)
    from jobs import services as job_services
    with run_on_commit():
        job_services.job_cancel(actor=world["member"], job=other)
    step(sandbox, 25)
    sync(world, run_on_commit)

    # Resume: a new run with the same volume and token hash.
    first_run = workspace.run_id
    with run_on_commit():
        workspace = services.workspace_resume(actor=world["member"], workspace=workspace)
    assert workspace.stage == Stage.ACTIVE and workspace.run_id != first_run
    step(sandbox, 30)
    step(sandbox, 40)
    sync(world, run_on_commit)
    (pod,) = run_pods(world, workspace)
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == workspace.volume_name
    assert objects(world, "Service")[workspace.object_name]["spec"]["selector"] == {
        "gpu-portal.io/job": str(workspace.run_id)}

    # Delete: the run, the Service and the volume go.
    with run_on_commit():
        services.workspace_delete(actor=world["member"], workspace=workspace)
    step(sandbox, 50)
    assert run_pods(world, workspace) == []
    assert workspace.volume_name not in objects(world, "PersistentVolumeClaim")
    assert workspace.object_name not in objects(world, "Service")
    actions = [e.action for e in selectors.workspace_events(workspace=workspace)]
    assert actions == ["workspace.delete", "workspace.resume", "workspace.suspend", "workspace.warn",
                       "workspace.create"]
    warn = selectors.workspace_events(workspace=workspace)[3]
    assert warn.after["activity"]["idle"] is True and warn.after["activity"]["utilisation"] == 0.0
    # The team's webhook heard each stage, signed with its secret, with the reading that triggered it.
    assert [c["json"]["event"] for c in receiver.calls] == ["workspace.warned", "workspace.suspended"]
    assert all(signed(call, secret) for call in receiver.calls)
    suspended = receiver.calls[1]["json"]
    assert suspended["workspace"]["volume"] == workspace.volume_name
    assert suspended["workspace"]["activity"]["verdict"].startswith("does no work")
    assert "Resume" in suspended["next"]


def test_a_preempted_job_is_told_to_the_team_webhook(sandbox, run_on_commit, receiver, mailoutbox):
    """Kueue preempts a lower tier for a higher one: the submitter's e-mail and the team's webhook, with the
    scheduler's reason in words and what happens next."""
    from tests.jobs.test_simulated import submit

    world = build_world(sandbox.url, "kueue", guaranteed=8, burst=0)
    secret = hooked(world, receiver)
    low = submit(world, run_on_commit, name="cheap", kind="batch", workers=1, gpus_per_worker=8,
                 priority_tier=world["tiers"]["standard"])
    step(sandbox, 0)
    step(sandbox, 6)
    submit(world, run_on_commit, name="deadline", kind="batch", workers=1, gpus_per_worker=8,
           priority_tier=world["tiers"]["urgent"])
    step(sandbox, 7)
    sync(world, run_on_commit)
    assert [m.subject for m in mailoutbox] == ["Job cheap preempted"]
    (call,) = receiver.calls
    assert signed(call, secret) and call["json"]["event"] == "job.preempted"
    assert call["json"]["job"]["id"] == low.pk
    assert call["json"]["reason"] == "Preempted: a higher-priority job of the same team needed the GPUs. " \
        "It queues again by itself and restarts when the GPUs are free; cancel it if it is no longer needed."
    assert call["json"]["next"].startswith("It queues again by itself")


def test_keep_it_running_holds_off_the_idle_rule(sandbox, run_on_commit, settings, stages, mailoutbox):
    settings.WORKSPACE_EXTENSION_MINUTES = 60
    world = build_world(sandbox.url, "kueue", guaranteed=8, burst=0)
    workspace, _ = start(world, run_on_commit, settings, tool="code-server",
                         image=settings.WORKSPACE_IMAGES["code-server"][0])
    step(sandbox, 0)
    step(sandbox, 10)
    sync(world, run_on_commit)
    set_activity(world, workspace, "idle")
    now = timezone.now()
    cull(run_on_commit, now)
    assert cull(run_on_commit, now + timedelta(minutes=11))["moved"] == {workspace.pk: Stage.WARNED}
    workspace = services.workspace_keep(actor=world["member"], workspace=Workspace.objects.get(pk=workspace.pk))
    assert workspace.stage == Stage.ACTIVE
    # Within the extension (which is measured from now, the test's clock being the real one) nothing happens.
    assert cull(run_on_commit, now + timedelta(minutes=30))["moved"] == {}
    assert Workspace.objects.get(pk=workspace.pk).stage == Stage.ACTIVE


def test_a_long_suspended_workspace_loses_its_volume_with_notice(sandbox, run_on_commit, settings, stages,
                                                                   mailoutbox):
    world = build_world(sandbox.url, "volcano", guaranteed=8, burst=0)
    workspace, _ = start(world, run_on_commit, settings)
    with run_on_commit():
        services.workspace_suspend(actor=world["member"], workspace=workspace)
    assert workspace.volume_name in objects(world, "PersistentVolumeClaim")
    later = timezone.now() + timedelta(days=2)
    assert cull(run_on_commit, later)["volumes"] == 1
    assert workspace.volume_name not in objects(world, "PersistentVolumeClaim")
    assert [m.subject for m in mailoutbox] == ["Workspace nb volume deleted"]
    settings.WORKSPACE_VOLUME_POLICY = "keep"
    assert cull(run_on_commit, later)["volumes"] == 0


def test_with_a_host_pattern_the_way_in_is_an_ingress_url(sandbox, run_on_commit, settings):
    settings.WORKSPACE_HOST_PATTERN = "{workspace}.{team}.ws.example.com"
    settings.WORKSPACE_INGRESS_CLASS = "nginx"
    world = build_world(sandbox.url, "kueue", guaranteed=8, burst=0)
    workspace, _ = start(world, run_on_commit, settings, tool="code-server",
                         image=settings.WORKSPACE_IMAGES["code-server"][0])
    ingress = objects(world, "Ingress", "networking.k8s.io/v1")[workspace.object_name]
    host = f"{workspace.object_name}.nlp.ws.example.com"
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["rules"][0]["host"] == host
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": workspace.object_name, "port": {"number": 8080}}
    assert selectors.way_in(workspace) == {"url": f"https://{host}/", "port_forward": ""}
    with run_on_commit():
        services.workspace_suspend(actor=world["member"], workspace=workspace)
    assert workspace.object_name not in objects(world, "Ingress", "networking.k8s.io/v1")


def test_a_server_that_stops_by_itself_can_be_resumed(sandbox, run_on_commit, settings):
    world = build_world(sandbox.url, "volcano", guaranteed=8, burst=0)
    workspace, _ = start(world, run_on_commit, settings)
    step(sandbox, 0)
    sandbox.simulator.plan("nlp", workspace.run.object_name, outcome="fail")
    step(sandbox, 10)
    sandbox.simulator.plan("nlp", workspace.run.object_name, duration=0)
    step(sandbox, 11)
    sync(world, run_on_commit)
    workspace = Workspace.objects.select_related("run").get(pk=workspace.pk)
    assert workspace.run.state == JobState.FAILED and workspace.run_ended and workspace.stage == Stage.ACTIVE
    first = workspace.run_id
    with run_on_commit():
        workspace = services.workspace_resume(actor=world["member"], workspace=workspace)
    assert workspace.run_id != first and not workspace.run_ended
    assert objects(world, "Service")[workspace.object_name]["spec"]["selector"] == {
        "gpu-portal.io/job": str(workspace.run_id)}
