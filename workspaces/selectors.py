"""Reads of workspaces, scoped to the user's teams (another team's workspace is a 404), and the objects a workspace
should hold in its cluster."""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from jobs import selectors as job_selectors
from jobs.models import Job
from tenants.models import GpuFlavor
from tenants.records import AuditEvent
from tenants.selectors import visible_team_ids

from .choices import LIVE_STAGES, Stage
from .manifests import TOOLS, WorkspaceSpec, host_for, run_fields, workspace_manifests
from .models import Workspace

RELATIONS = ("team", "cluster", "flavor", "priority_tier", "owner", "run")


def workspace_list(*, user, team=None, include_deleted: bool = False) -> QuerySet[Workspace]:
    rows = Workspace.objects.select_related(*RELATIONS)
    ids = visible_team_ids(user=user)
    if ids is not None:
        rows = rows.filter(team_id__in=ids)
    if team is not None:
        rows = rows.filter(team=team)
    if not include_deleted:
        rows = rows.exclude(stage=Stage.DELETED)
    return rows


def workspace_get(*, user, pk: int) -> Workspace:
    found = workspace_list(user=user, include_deleted=True).filter(pk=pk).first()
    if found is None:
        raise Http404("No such workspace")
    return found


def workspace_events(*, workspace: Workspace, limit: int = 30) -> list[AuditEvent]:
    """Its audit trail, newest first: each stage with what the GPUs were doing when it was taken."""
    return list(AuditEvent.objects.filter(object_type="workspace", object_id=str(workspace.pk))
                .select_related("actor")[:limit])


def workspace_host(workspace: Workspace) -> str:
    return host_for(settings.WORKSPACE_HOST_PATTERN, name=workspace.object_name, team=workspace.team.slug)


def workspace_spec(workspace: Workspace) -> WorkspaceSpec:
    serving = workspace.stage in LIVE_STAGES and workspace.run_id is not None
    return WorkspaceSpec(name=workspace.object_name, namespace=workspace.team.namespace,
                         team_slug=workspace.team.slug, workspace_id=workspace.pk, tool=workspace.tool,
                         volume_gib=workspace.volume_gib, keep_volume=workspace.volume_deleted_at is None,
                         run_id=workspace.run_id if serving else 0, storage_class=settings.WORKSPACE_STORAGE_CLASS,
                         host=workspace_host(workspace), ingress_class=settings.WORKSPACE_INGRESS_CLASS)


def workspace_desired(*, workspace: Workspace) -> list[dict]:
    return workspace_manifests(workspace_spec(workspace))


WORKSPACE_KINDS = (("v1", "PersistentVolumeClaim"), ("v1", "Service"), ("networking.k8s.io/v1", "Ingress"))


def workspaces_due(*, limit: int = 500) -> list[int]:
    return list(Workspace.objects.filter(next_attempt_at__lte=timezone.now()).order_by("next_attempt_at")
                .values_list("pk", flat=True)[:limit])


def run_spec_fields(job: Job) -> dict:
    """What a workspace's run adds to its job spec (registered with `jobs.selectors.SPEC_EXTRAS`)."""
    workspace = Workspace.objects.filter(run=job).only("pk", "name", "tool").first()
    if workspace is None:  # an earlier run: it is only ever deleted
        return {}
    return run_fields(workspace.tool, workspace.volume_name)


def way_in(workspace: Workspace) -> dict:
    """How its owner reaches it: the URL where the platform gives workspaces a host, else the port-forward
    command and the local URL it opens."""
    host = workspace_host(workspace)
    if host:
        return {"url": f"https://{host}/", "port_forward": ""}
    return {"url": f"http://localhost:{TOOLS[workspace.tool].port}/", "port_forward": workspace.port_forward}


def why_waiting(workspace: Workspace) -> str:
    run = workspace.run
    if run is None or run.state not in ("pending", "queued"):
        return ""
    return job_selectors.why_waiting(job=run)


def workspace_flavors(*, team) -> QuerySet[GpuFlavor]:
    return job_selectors.submit_flavors(team=team)


def images(tool: str | None = None) -> list[str]:
    found = settings.WORKSPACE_IMAGES
    return list(found.get(tool, [])) if tool else sorted({image for items in found.values() for image in items})


def cullable(*, cluster_id: int | None = None) -> QuerySet[Workspace]:
    """Workspaces whose run is running (the ones whose GPUs are read), with what a decision needs."""
    rows = Workspace.objects.filter(stage__in=LIVE_STAGES, run__state="running").select_related(*RELATIONS)
    return rows.filter(cluster_id=cluster_id) if cluster_id else rows


def volumes_to_expire(*, before) -> QuerySet[Workspace]:
    return Workspace.objects.filter(stage=Stage.SUSPENDED, volume_deleted_at__isnull=True,
                                    suspended_at__lte=before).select_related(*RELATIONS)
