"""Holding a team's new work while its hard budget or an allowance is spent, in the scheduler itself.

One pass (`budget_enforce`, run by beat and after every change to a budget, allowance or override):
1. every team under enforcement (or still recorded as held) is judged now (`holds.team_holds`);
2. its hold row opens (the team admins get one e-mail), changes its sentence, or closes;
3. in each cluster the team has a namespace in, its backend says what to write (`Backend.budget_writes`):
   under Kueue the state of the portal's AdmissionCheck on each of the team's Workloads (the portal is that
   check's controller and keeps it Active), under Volcano the team's Queue closed or open;
4. jobs the portal kept back (a scheduler that would refuse them: `Backend.budget_holds_in_portal`) are made due
   again once their team is no longer held;
5. on priority tiers that say so, running jobs are suspended with notice and resubmitted behind the hold
   (`suspend`).
The database is the truth: a lost pass is made good by the next one, and a pass that finds nothing changed
writes nothing.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from backends import backend_for
from backends.base import ANY_FLAVOR
from backends.specs import TeamQuotaSpec
from jobs.choices import JobState
from jobs.models import Job
from portal import desired, kube
from portal.enqueue import enqueue_on_commit
from tenants.choices import Role
from tenants.models import Cluster, Membership, Team, TeamNamespace
from tenants.services import audit_record, notify_users

from . import holds, suspend
from .models import BudgetHold

log = logging.getLogger(__name__)
RECENTLY = timedelta(days=1)
HELD_MARK = "Held by the budget"  # how every hold sentence starts (`holds`), so held jobs are found again


def budget_checks_for(team: Team, cluster: Cluster) -> tuple[str, ...]:
    """The admission checks a team's queue lists in a cluster: the portal's budget check, while enforced."""
    check = backend_for(cluster).budget_check
    return (check,) if check and holds.team_enforced(team=team) else ()


def job_held_by_budget(job) -> str:
    """Why the portal keeps a job back from a scheduler that would refuse it ("" when it may go)."""
    return team_held_by_budget(job.team) if backend_for(job.cluster).budget_holds_in_portal else ""


def team_held_by_budget(team) -> str:
    """What holds the team's new jobs now, as its open hold row says ("" when nothing does)."""
    hold = BudgetHold.objects.filter(team=team, ended_at__isnull=True).only("message").first()
    return hold.message if hold else ""


def _hold_message(state: holds.TeamBudgetState):
    """`hold_message(flavors)` for the backends: what holds these flavors (None: before they are known, only what
    holds every flavor; ANY_FLAVOR: whatever holds the team), with who can lift it; "" when nothing does."""
    def message(flavors) -> str:
        return _sentence([h for h in state.holds if flavors == ANY_FLAVOR or h.flavor is None
                          or (flavors is not None and h.flavor in flavors)])
    return message


def _sentence(found: list[holds.Hold]) -> str:
    return " ".join(f"{h.sentence} {h.who_lifts}" for h in found)


@transaction.atomic
def _record_hold(state: holds.TeamBudgetState, now: datetime) -> str:
    """Open, update or close the team's hold row; "opened", "closed" or "" (unchanged or updated)."""
    team = state.team
    hold = BudgetHold.objects.select_for_update().filter(team=team, ended_at__isnull=True).first()
    sentence = _sentence(state.holds)
    if state.held and hold is None:
        hold = BudgetHold.objects.create(team=team, started_at=now, message=sentence)
        audit_record(actor=None, action="budget.hold_start", obj=hold, team=team, after={"message": sentence})
        admins = [m.user for m in Membership.objects.filter(team=team, role=Role.ADMIN).select_related("user")]
        notify_users(users=admins, subject=f"{team.name}: new GPU jobs are held by the budget",
                     body=(f"{sentence}\n\nJobs already running continue. New jobs of {team.name} wait before "
                           "admission, whether sent from the portal or with kubectl, until the hold lifts."))
        suspend.hold_notice(hold=hold)
        return "opened"
    if state.held and hold.message != sentence:
        hold.message = sentence
        hold.save(update_fields=["message"])
    if not state.held and hold is not None:
        hold.ended_at = now
        hold.save(update_fields=["ended_at"])
        audit_record(actor=None, action="budget.hold_end", obj=hold, team=team,
                     after={"lifted_until": state.lifted_until.isoformat() if state.lifted_until else None})
        return "closed"
    return ""


def _enforce_in_cluster(cluster: Cluster, rows: list[TeamNamespace], states: dict, now_iso: str) -> int:
    backend = backend_for(cluster)
    client = kube.client_for_cluster(cluster)
    writes = []
    enforced = [row for row in rows if states[row.team_id].enforced or states[row.team_id].held]
    if enforced and backend.budget_controller_reads():
        writes += backend.budget_controller_writes(client.list_all(backend.budget_controller_reads()), now_iso)
    for row in rows:
        state = states[row.team_id]
        team = row.team
        objects = client.list_all(backend.budget_reads(namespace=team.namespace, team_slug=team.slug))
        queue = TeamQuotaSpec(slug=team.slug, namespace=team.namespace, quotas=(), cluster_flavors=()).queue_name
        writes += backend.budget_writes(objects, queue_name=queue, hold_message=_hold_message(state), now=now_iso,
                                        release_after=settings.BUDGET_HOLD_RESERVATION_SECONDS)
    written = 0
    for obj in writes:
        try:
            client.apply_status(obj)
            written += 1
        except kube.KubeError as exc:
            if exc.status != 404:  # a workload that finished and went meanwhile needs nothing
                raise
    return written


def budget_enforce(*, now: datetime | None = None) -> dict:
    """One pass over every team under enforcement or still held; returns what it did."""
    now = now or timezone.now()
    # Teams whose hold ended in the last day too: a queue a failed write left closed is opened by a later pass.
    teams = Team.objects.filter(holds.enforced(now) | Q(budget_holds__ended_at__isnull=True)
                                | Q(budget_holds__ended_at__gte=now - RECENTLY)).distinct()
    states = holds.team_holds(teams=teams.order_by("pk"), now=now)
    counts = {"teams": len(states), "held": 0, "opened": 0, "closed": 0, "writes": 0, "released_jobs": 0,
              "suspended": 0, "errors": 0}
    for state in states.values():
        counts["held"] += state.held
        change = _record_hold(state, now)
        if change:
            counts[change] += 1
    rows = (TeamNamespace.objects.filter(team_id__in=list(states), deleted_at__isnull=True, cluster__active=True)
            .select_related("team", "cluster").order_by("cluster_id", "pk"))
    by_cluster: dict[int, list[TeamNamespace]] = {}
    for row in rows:
        by_cluster.setdefault(row.cluster_id, []).append(row)
    now_iso = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    for members in by_cluster.values():
        try:
            counts["writes"] += _enforce_in_cluster(members[0].cluster, members, states, now_iso)
        except kube.KubeError as exc:  # another cluster must still be enforced; the next pass retries this one
            counts["errors"] += 1
            log.warning("budget enforcement in cluster %s failed: %s", members[0].cluster.name, exc)
    counts["released_jobs"] = _release_jobs([pk for pk, s in states.items() if not s.held])
    counts["suspended"] = suspend.suspend_due(now=now)
    return counts


def _release_jobs(team_ids: list[int]) -> int:
    """Jobs the portal kept back for a team no longer held are due again (the job reconcile sends them)."""
    from jobs import tasks as job_tasks

    with transaction.atomic():
        kept = list(Job.objects.filter(team_id__in=team_ids, state=JobState.PENDING, next_attempt_at__isnull=True,
                                       state_message__startswith=HELD_MARK).values_list("pk", flat=True))
        if kept:
            Job.objects.filter(pk__in=kept).update(next_attempt_at=timezone.now())
            for pk in kept:
                enqueue_on_commit(job_tasks.job_reconcile_task, pk)
    return len(kept)


def enforcement_changed(*, team: Team) -> None:
    """After a budget, allowance or override changed: the team's queues may list the check or not any more
    (reconcile its namespaces), and its holds may start or lift now (a pass, on commit)."""
    from . import tasks

    ids = list(team.namespaces.filter(deleted_at__isnull=True).values_list("pk", flat=True))
    transaction.on_commit(lambda: desired.reconciler().team_namespaces(ids))
    enqueue_on_commit(tasks.budget_enforce_task)
