"""The demo's database (seed_demo's clusters, flavors, tiers, teams, grants and every seed_jobs job, submitted as
seed_jobs submits them) and every object the portal generates from it: `export_manifests` plus each job's."""

import io

import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command

from composition.management.commands import seed_demo, seed_jobs
from jobs import services as job_services
from jobs.manifests import job_manifests
from jobs.models import Job
from jobs.selectors import job_spec
from tenants.models import Cluster, GpuFlavor, PriorityTier, Team


def seed() -> None:
    """seed_demo's own data against two throwaway sandboxes (it registers the demo nodes over their API); no
    simulation, so the jobs are only submitted. Nothing is applied: reconcile nudges wait for a commit."""
    from sandbox import Sandbox

    with Sandbox() as east, Sandbox() as west:
        seed_demo.Command(stdout=io.StringIO())._seed(east.url, west.url)
    users = get_user_model().objects
    for row in seed_jobs.JOBS:
        cluster, slug, username, name, kind, flavor, workers, gpus, tier = row[:9]
        placement = row[11] if len(row) > 11 else {}
        job_services.job_submit(
            actor=users.get(username=username), team=Team.objects.get(slug=slug),
            flavor=GpuFlavor.objects.get(cluster__name=cluster, name=flavor), kind=kind, name=name,
            image=f"registry.example.com/{slug}/{kind}:1.0", command=seed_jobs.COMMANDS[kind], workers=workers,
            gpus_per_worker=gpus, cpu_per_worker=4, memory_gib_per_worker=32,
            priority_tier=PriorityTier.objects.get(name=tier), notify=False, **placement)


def exported(cluster: Cluster) -> list[dict]:
    out = io.StringIO()
    call_command("export_manifests", cluster=cluster.name, stdout=out)
    return [doc for doc in yaml.safe_load_all(out.getvalue()) if doc]


def job_objects(cluster: Cluster) -> list[dict]:
    return [obj for job in Job.objects.filter(cluster=cluster).select_related(
        "team", "cluster", "flavor", "priority_tier").order_by("pk") for obj in job_manifests(job_spec(job))]


def apply_order(obj: dict) -> tuple[int, str]:
    """Namespaces, then the other cluster-scoped objects, then what lives in a namespace."""
    namespaced = bool(obj["metadata"].get("namespace"))
    return (0 if obj["kind"] == "Namespace" else 2 if namespaced else 1), obj["kind"]
