"""Writes for workspaces: create (with its first run), suspend, resume, keep running, delete, and the reconcile of
its volume, Service and Ingress. A run is a job of kind `workspace` started through `jobs.services.job_submit`, so
it queues, waits and is estimated like any job; suspending or deleting a workspace stops its run
(`jobs.services.job_stop`), which deletes the run's objects and so gives its quota back.

Lock order: the workspace row, then its run's job row."""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs import services as job_services
from jobs.choices import JobKind
from portal import kube
from portal.enqueue import enqueue_on_commit
from portal.errors import Conflict
from portal.naming import managed_selector
from portal.reconcile import Outcome, converge, plan, record
from tenants.audit import audit_record
from tenants.choices import Role
from tenants.models import GpuFlavor, PriorityTier, Team
from tenants.selectors import team_role

from . import notices, selectors, tasks
from .choices import LIVE_STAGES, Stage
from .manifests import WORKSPACE_LABEL, access_hash, run_command
from .models import Workspace

log = logging.getLogger(__name__)
RUN_FIELDS = {"workers": "gpus", "gpus_per_worker": "gpus", "cpu_per_worker": "cpu",
              "memory_gib_per_worker": "memory_gib"}
RUN_MINUTES = 30 * 24 * 60  # a run's maximum run time: the longest a job may ask; culling ends idle ones sooner


def _require_member(*, actor, team: Team) -> str:
    role = team_role(user=actor, team=team)
    if role not in (Role.ADMIN, Role.MEMBER):
        raise PermissionDenied("Only the team's admins and members can start and change workspaces.")
    return role


def _require_owner_or_admin(*, actor, workspace: Workspace) -> None:
    role = _require_member(actor=actor, team=workspace.team)
    if role != Role.ADMIN and workspace.owner_id != actor.pk:
        raise PermissionDenied("Only the workspace's owner or a team admin can do this.")


def _check_image(tool: str, image: str) -> None:
    if settings.WORKSPACE_ANY_IMAGE or image in selectors.images(tool):
        return
    choices = ", ".join(selectors.images(tool)) or "none configured"
    raise ValidationError({"image": f"Choose one of the platform's {tool} images: {choices}."})


def _new_token(tool: str) -> tuple[str, str]:
    token = secrets.token_urlsafe(32)
    return token, access_hash(tool, token, secrets.token_hex(8))


def _start_run(*, actor, workspace: Workspace, source_ip: str | None = None) -> None:
    command, args, env = run_command(workspace.tool, workspace.access_hash)
    try:
        run = job_services.job_submit(
            actor=actor, team=workspace.team, flavor=workspace.flavor, kind=JobKind.WORKSPACE, name=workspace.name,
            image=workspace.image, command=command, args=args, env=env, workers=1, gpus_per_worker=workspace.gpus,
            cpu_per_worker=workspace.cpu, memory_gib_per_worker=workspace.memory_gib,
            priority_tier=workspace.priority_tier, max_runtime_minutes=RUN_MINUTES, notify=False,
            source_ip=source_ip)
    except ValidationError as exc:  # the job's fields named as the workspace's
        raise ValidationError({RUN_FIELDS.get(name, name): messages
                               for name, messages in exc.update_error_dict({}).items()}) from exc
    workspace.run = run
    workspace.idle_since = workspace.warned_at = workspace.keep_until = None
    workspace.activity = {}


def _bump(workspace: Workspace, fields: list[str]) -> None:
    workspace.generation = F("generation") + 1
    workspace.next_attempt_at = timezone.now()
    workspace.save(update_fields=[*fields, "generation", "next_attempt_at"])
    enqueue_on_commit(tasks.workspace_reconcile_task, workspace.pk)
    workspace.refresh_from_db(fields=["generation"])


@transaction.atomic
def workspace_create(*, actor, team: Team, flavor: GpuFlavor, name: str, tool: str, image: str, gpus: int = 1,
                     cpu: int = 4, memory_gib: int = 32, volume_gib: int = 50,
                     priority_tier: PriorityTier | None = None,
                     source_ip: str | None = None) -> tuple[Workspace, str]:
    """The workspace and its access token (shown once: only its hash is kept)."""
    _require_member(actor=actor, team=team)
    _check_image(tool, image)
    priority_tier = priority_tier or PriorityTier.objects.filter(is_default=True).first()
    token, hashed = _new_token(tool)
    workspace = Workspace(team=team, cluster=flavor.cluster, flavor=flavor, priority_tier=priority_tier,
                          owner=actor, name=name, tool=tool, image=image, gpus=gpus, cpu=cpu, memory_gib=memory_gib,
                          volume_gib=volume_gib, access_hash=hashed, next_attempt_at=timezone.now())
    workspace.full_clean(exclude=["priority_tier"] if priority_tier is None else None)
    if Workspace.objects.filter(team=team, cluster=flavor.cluster, name=name).exclude(stage=Stage.DELETED).exists():
        raise ValidationError({"name": f"The team already has a workspace named {name} in {flavor.cluster.name}."})
    workspace.save()
    _start_run(actor=actor, workspace=workspace, source_ip=source_ip)
    workspace.save(update_fields=["run", "idle_since", "warned_at", "keep_until", "activity"])
    audit_record(actor=actor, action="workspace.create", obj=workspace, team=team, source_ip=source_ip,
                 after={"tool": tool, "image": image, "flavor": flavor.name, "gpus": gpus, "volume_gib": volume_gib})
    enqueue_on_commit(tasks.workspace_reconcile_task, workspace.pk)
    return workspace, token


def _locked(workspace: Workspace) -> Workspace:
    return Workspace.objects.select_for_update(of=("self",)).select_related(*selectors.RELATIONS).get(
        pk=workspace.pk)


def _stop_run(workspace: Workspace, reason: str) -> None:
    if workspace.run is not None:
        job_services.job_stop(job=workspace.run, reason=reason)


@transaction.atomic
def workspace_suspend(*, workspace: Workspace, actor=None, reason: str = "", activity: dict | None = None,
                      source_ip: str | None = None) -> Workspace:
    """Its run ends (pod gone, quota given back); its volume stays. `actor` None is the platform's idle rule."""
    if actor is not None:
        _require_owner_or_admin(actor=actor, workspace=workspace)
    workspace = _locked(workspace)
    if workspace.stage not in LIVE_STAGES:
        raise Conflict(f"The workspace is {workspace.get_stage_display().lower()}.")
    _stop_run(workspace, f"Its workspace was suspended: {reason or 'by its owner'}")
    workspace.stage, workspace.suspended_at = Stage.SUSPENDED, timezone.now()
    _bump(workspace, ["stage", "suspended_at"])
    audit_record(actor=actor, action="workspace.suspend", obj=workspace, team=workspace.team, source_ip=source_ip,
                 after={"reason": reason or "suspended by its owner", "activity": activity or workspace.activity})
    if actor is None:
        notices.tell(workspace, "suspended", reason)
    return workspace


@transaction.atomic
def workspace_resume(*, actor, workspace: Workspace, source_ip: str | None = None) -> Workspace:
    """One click: a new run queues under the team's quota with the same volume and the same access token."""
    _require_owner_or_admin(actor=actor, workspace=workspace)
    workspace = _locked(workspace)
    if workspace.stage != Stage.SUSPENDED and not workspace.run_ended:
        raise Conflict("Only a suspended workspace, or one whose server stopped, can be resumed.")
    if workspace.volume_deleted_at is not None:
        raise Conflict("Its home volume was deleted: start a new workspace.")
    _start_run(actor=actor, workspace=workspace, source_ip=source_ip)
    workspace.stage, workspace.suspended_at = Stage.ACTIVE, None
    _bump(workspace, ["stage", "suspended_at", "run", "idle_since", "warned_at", "keep_until", "activity"])
    audit_record(actor=actor, action="workspace.resume", obj=workspace, team=workspace.team, source_ip=source_ip,
                 after={"run": workspace.run_id})
    return workspace


@transaction.atomic
def workspace_keep(*, actor, workspace: Workspace, source_ip: str | None = None) -> Workspace:
    """"Keep it running": the idle rule leaves it alone for the platform's extension, once per warning."""
    _require_owner_or_admin(actor=actor, workspace=workspace)
    workspace = _locked(workspace)
    if workspace.stage != Stage.WARNED:
        raise Conflict("Only a workspace warned for idling can be kept running.")
    now = timezone.now()
    workspace.stage, workspace.warned_at = Stage.ACTIVE, None
    workspace.keep_until = now + timedelta(minutes=settings.WORKSPACE_EXTENSION_MINUTES)
    workspace.idle_since = None
    workspace.save(update_fields=["stage", "warned_at", "keep_until", "idle_since"])
    audit_record(actor=actor, action="workspace.keep", obj=workspace, team=workspace.team, source_ip=source_ip,
                 after={"until": workspace.keep_until.isoformat(timespec="seconds")})
    return workspace


def workspace_seen(*, workspace: Workspace, activity: dict, idle_since) -> None:
    """Record a reading of its GPUs; busy again takes back a warning."""
    fields = {"activity": activity, "idle_since": idle_since}
    with transaction.atomic():
        if workspace.stage == Stage.WARNED and not activity.get("idle"):
            fields.update(stage=Stage.ACTIVE, warned_at=None)
            audit_record(actor=None, action="workspace.busy", obj=workspace, team=workspace.team,
                         after={"activity": activity})
        Workspace.objects.filter(pk=workspace.pk).update(**fields)
    for name, value in fields.items():
        setattr(workspace, name, value)


@transaction.atomic
def workspace_warn(*, workspace: Workspace, activity: dict, idle_since, reason: str, now=None) -> None:
    """The idle rule's first stage: the owner is told, the page shows a banner with "keep it running"."""
    now = now or timezone.now()
    Workspace.objects.filter(pk=workspace.pk, stage=Stage.ACTIVE).update(
        stage=Stage.WARNED, warned_at=now, activity=activity, idle_since=idle_since)
    workspace.stage, workspace.warned_at, workspace.activity, workspace.idle_since = \
        Stage.WARNED, now, activity, idle_since
    audit_record(actor=None, action="workspace.warn", obj=workspace, team=workspace.team,
                 after={"reason": reason, "activity": activity})
    notices.tell(workspace, "warned", reason)


@transaction.atomic
def workspace_delete(*, workspace: Workspace, actor=None, reason: str = "",
                     source_ip: str | None = None) -> Workspace:
    """Its run ends and its volume, Service and Ingress are deleted."""
    if actor is not None:
        _require_owner_or_admin(actor=actor, workspace=workspace)
    workspace = _locked(workspace)
    if workspace.stage == Stage.DELETED:
        raise Conflict("The workspace is already deleted.")
    _stop_run(workspace, "Its workspace was deleted.")
    now = timezone.now()
    workspace.stage, workspace.deleted_at = Stage.DELETED, now
    workspace.volume_deleted_at = workspace.volume_deleted_at or now
    _bump(workspace, ["stage", "deleted_at", "volume_deleted_at"])
    audit_record(actor=actor, action="workspace.delete", obj=workspace, team=workspace.team, source_ip=source_ip,
                 after={"reason": reason or "deleted by its owner"})
    return workspace


@transaction.atomic
def workspace_volume_delete(*, workspace: Workspace, reason: str) -> Workspace:
    """The platform's policy for long-suspended workspaces: the volume goes, the owner is told."""
    workspace = _locked(workspace)
    if workspace.stage != Stage.SUSPENDED or workspace.volume_deleted_at is not None:
        return workspace
    workspace.volume_deleted_at = timezone.now()
    _bump(workspace, ["volume_deleted_at"])
    audit_record(actor=None, action="workspace.volume_delete", obj=workspace, team=workspace.team,
                 after={"reason": reason})
    notices.tell(workspace, "volume deleted", reason)
    return workspace


# --- reconcile ------------------------------------------------------------------------------------------------


def _actual(client: kube.ClusterClient, workspace: Workspace) -> list[dict]:
    selector = f"{managed_selector()},{WORKSPACE_LABEL}={workspace.pk}"
    return [obj for api_version, kind in selectors.WORKSPACE_KINDS
            for obj in client.list(api_version, kind, namespace=workspace.team.namespace, label_selector=selector)]


def workspace_reconcile(*, workspace_id: int) -> Outcome:
    """Apply its volume, Service and Ingress as they should be now; delete what should not be there."""
    workspace = Workspace.objects.select_related("team", "cluster").filter(pk=workspace_id).first()
    if workspace is None or not workspace.cluster.active:
        return Outcome(statuses=[], writes=0)
    generation = workspace.generation
    desired = selectors.workspace_desired(workspace=workspace)
    try:
        client = kube.client_for_cluster(workspace.cluster)
        actual = _actual(client, workspace)
    except kube.KubeError as exc:
        return record(workspace, generation, Outcome(statuses=workspace.objects_status, writes=0, error=exc))
    return record(workspace, generation, converge(client, plan(desired, actual)))


def workspace_reconcile_due(*, limit: int = 500) -> int:
    done = 0
    for pk in selectors.workspaces_due(limit=limit):
        try:
            workspace_reconcile(workspace_id=pk)
        except Exception:  # noqa: BLE001 - the next workspace (maybe on another cluster) must still be reconciled
            log.exception("reconcile of workspace %s failed", pk)
        done += 1
    return done
