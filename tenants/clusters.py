"""Writes to the platform's rows: clusters, GPU flavors, priority tiers, and deletes made in the Django admin.
Each one nudges the reconcile of what its change affects."""

from django.db import transaction

from . import cluster_parts
from .audit import audit_record, snapshot
from .checks import capacity_checks_run
from .choices import TeamState
from .models import Cluster, GpuFlavor, PriorityTier, Team, TeamNamespace
from .nudges import clusters_touch, lease, team_namespaces_touch

CLUSTER_FIELDS = ["name", "display_name", "connection", "server", "context", "scheduler", "cohort", "overcommit",
                  "mig_strategy", "topology_levels", "active"]


def _cluster_snapshot(cluster: Cluster) -> dict:
    return {**snapshot(cluster, CLUSTER_FIELDS), **cluster_parts.snapshot(cluster)}


@transaction.atomic
def cluster_create(*, actor, source_ip: str | None = None, **fields) -> Cluster:
    """Fields other apps keep for a cluster (cluster_parts) may be given with its own; every part gets its row."""
    fields, by_part = cluster_parts.split(fields)
    cluster = Cluster(**fields)
    cluster.full_clean()
    cluster.save()
    cluster_parts.save(cluster=cluster, by_part=by_part, created=True)
    teams = Team.objects.exclude(state=TeamState.ARCHIVED)
    TeamNamespace.objects.bulk_create([TeamNamespace(team=t, cluster=cluster, next_attempt_at=lease())
                                       for t in teams])
    audit_record(actor=actor, action="cluster.create", obj=cluster, after=_cluster_snapshot(cluster),
                 source_ip=source_ip)
    clusters_touch(clusters=Cluster.objects.filter(pk=cluster.pk))
    team_namespaces_touch(team_namespaces=cluster.team_namespaces.all())
    return cluster


@transaction.atomic
def cluster_update(*, actor, cluster: Cluster, source_ip: str | None = None, **fields) -> Cluster:
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    before = _cluster_snapshot(cluster)
    fields, by_part = cluster_parts.split(fields)
    for name, value in fields.items():
        setattr(cluster, name, value)
    cluster.full_clean()
    capacity_checks_run("cluster", cluster=cluster, overcommit=cluster.overcommit)
    cluster.save()
    cluster_parts.save(cluster=cluster, by_part=by_part, created=False)
    audit_record(actor=actor, action="cluster.update", obj=cluster, before=before,
                 after=_cluster_snapshot(cluster), source_ip=source_ip)
    clusters_touch(clusters=Cluster.objects.filter(pk=cluster.pk))
    team_namespaces_touch(team_namespaces=cluster.team_namespaces.all())
    return cluster


FLAVOR_FIELDS = ["cluster", "name", "resource_name", "gpu_model", "node_labels", "node_taints", "tolerations",
                 "capacity", "gpus_per_node", "memory_gb", "gpu_fraction", "sharing", "mig_slices_per_gpu",
                 "replicas", "device_class", "device_selector", "spot"]


@transaction.atomic
def gpu_flavor_save(*, actor, flavor: GpuFlavor, source_ip: str | None = None) -> GpuFlavor:
    before = snapshot(GpuFlavor.objects.get(pk=flavor.pk), FLAVOR_FIELDS) if flavor.pk else None
    flavor.full_clean()
    capacity_checks_run("flavor", flavor=flavor, capacity=flavor.capacity, overcommit=flavor.cluster.overcommit)
    flavor.save()
    audit_record(actor=actor, action="flavor.save", obj=flavor, before=before,
                 after=snapshot(flavor, FLAVOR_FIELDS), source_ip=source_ip)
    clusters_touch(clusters=Cluster.objects.filter(pk=flavor.cluster_id))
    return flavor


@transaction.atomic
def priority_tier_save(*, actor, tier: PriorityTier, source_ip: str | None = None) -> PriorityTier:
    if tier.is_default:
        PriorityTier.objects.exclude(pk=tier.pk).filter(is_default=True).update(is_default=False)
    tier.full_clean()
    tier.save()
    audit_record(actor=actor, action="tier.save", obj=tier,
                 after=snapshot(tier, ["name", "value", "preemption_policy", "is_default"]), source_ip=source_ip)
    clusters_touch(clusters=Cluster.objects.filter(active=True))
    return tier



@transaction.atomic
def admin_object_delete(*, actor, obj, source_ip: str | None = None) -> None:
    """A delete made in the Django admin: audited with the actor and what the row held, like every other change.

    Cluster-wide objects built from a flavor or a tier are re-reconciled; a deleted team's objects are pruned by
    the sweep (they carry the team label and no row wants them any more).
    """
    before = snapshot(obj, [f.name for f in obj._meta.concrete_fields])
    team = obj.team if isinstance(obj, TeamNamespace) else None
    audit_record(actor=actor, action=f"{obj._meta.model_name}.delete", obj=obj, team=team, before=before,
                 source_ip=source_ip)
    affected = (Cluster.objects.filter(pk=obj.cluster_id) if isinstance(obj, GpuFlavor)
                else Cluster.objects.filter(active=True) if isinstance(obj, PriorityTier) else Cluster.objects.none())
    obj.delete()
    clusters_touch(clusters=affected)
