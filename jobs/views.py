"""Job pages: the filtered list, the submit form per kind (templates, a YAML preview of exactly what would be
applied), a job's page with its live status, pods and logs, and cancel/resubmit. Reads through selectors, writes
through services."""

import shlex

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from portal import yamltext
from portal.http import add_service_errors, confirmed_write, source_ip
from portal.kube import KubeError
from quotas import fair_share
from tenants import selectors as tenant_selectors
from tenants.choices import Role

from . import cost, estimates, holds, outcome, placement, selectors, services, sooner
from .choices import SUBMITTED_KINDS, JobKind
from .filters import JobFilter
from .forms import DEFAULT_COMMANDS, JobSubmitForm
from .manifests import job_manifests
from .models import Job

LOG_DOWNLOAD_LINES = 100_000


def _known_names(query, **known: list[str]):
    """The query with a typed user or flavor name replaced by the known name it matches in any case ("L40S " finds
    l40s), so the page matches names case-insensitively while the filters stay exact lookups."""
    query = query.copy()
    for key, names in known.items():
        typed = query.get(key, "").strip()
        if typed:
            query[key] = next((name for name in names if name.lower() == typed.lower()), typed)
    return query


@login_required
def job_list(request):
    known_users = tenant_selectors.known_usernames(user=request.user)
    known_flavors = tenant_selectors.known_flavor_names()
    filterset = JobFilter(_known_names(request.GET, user=known_users, flavor=known_flavors) or None)
    jobs = selectors.job_list(user=request.user, filters=filterset.values() if filterset.is_valid() else {})
    page = Paginator(jobs, 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "jobs/job_list.html", {"page": page, "live": any(not job.terminal for job in page),
                                                  "filters": filterset.form, "query": query.urlencode(),
                                                  "known_users": known_users, "known_flavors": known_flavors,
                                                  "submit_teams": tenant_selectors.submit_team_list(user=request.user),
                                                  "queue_clusters": tenant_selectors.queue_cluster_list(
                                                      user=request.user)})


@login_required
def job_submit(request, slug, kind):
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    if kind not in SUBMITTED_KINDS:
        raise Http404("Unknown job kind")
    if tenant_selectors.team_role(user=request.user, team=team) not in (Role.ADMIN, Role.MEMBER):
        raise PermissionDenied("Viewers cannot submit jobs.")
    flavors = selectors.submit_flavors(team=team)
    templates = selectors.job_templates(team=team, kind=kind)
    initial = {"command": DEFAULT_COMMANDS[kind], "name": f"{kind}-run"}
    chosen = request.GET.get("template", "")
    if chosen.isdigit():
        template = next((t for t in templates if t.pk == int(chosen)), None)
        if template:
            initial.update(template.values)
    levels = list(dict.fromkeys(level["name"] for f in flavors for level in f.cluster.topology_levels))
    form = JobSubmitForm(request.POST or None, flavors=flavors, initial=initial,
                         room=selectors.team_flavor_room(team=team), levels=levels)
    preview = None
    if form.is_bound and not form.is_valid():
        _feasibility_errors(form, team, kind)  # with the form's own errors, not on the next submit
    estimate = None
    if request.method == "POST" and form.is_valid():
        fields = form.service_fields()
        if form.cleaned_data["earliest_cluster"]:
            fields["flavor"] = sooner.earliest_flavor(team=team, kind=kind, tier=fields["priority_tier"], **{
                k: fields[k] for k in ("flavor", "image", "workers", "gpus_per_worker", "max_runtime_minutes")})
        if "preview" in request.POST:
            try:  # the same check Submit makes: a job that could never start says so before its YAML
                services.job_check_feasible(team=team, flavor=fields["flavor"], tier=fields["priority_tier"],
                                            workers=fields["workers"], gpus_per_worker=fields["gpus_per_worker"],
                                            kind=kind, cpu_per_worker=fields["cpu_per_worker"],
                                            memory_gib_per_worker=fields["memory_gib_per_worker"])
            except ValidationError as exc:
                add_service_errors(form, exc)
            else:
                preview = _preview(team, kind, fields)
                estimate = estimates.preview(team=team, kind=kind, tier=fields["priority_tier"], **{
                    k: fields[k] for k in ("flavor", "image", "workers", "gpus_per_worker", "max_runtime_minutes",
                                           "topology_level", "topology_mode")})
        else:
            try:
                job = services.job_submit(actor=request.user, team=team, kind=kind, source_ip=source_ip(request),
                                          **fields)
            except ValidationError as exc:
                add_service_errors(form, exc)
            else:
                if form.cleaned_data["save_as_template"]:
                    services.job_template_save(actor=request.user, team=team, kind=kind,
                                               name=form.cleaned_data["save_as_template"],
                                               values=form.template_values())
                named = "" if job.object_name.startswith(f"{job.name}-") else \
                    f" Its objects are named {job.object_name}: a Kubernetes name starts with a letter."
                messages.success(request, f"Job {job.name} submitted.{named}")
                return redirect("jobs:job-detail", pk=job.pk)
    prices = cost.unit_prices(flavors)
    return render(request, "jobs/job_form.html", {"team": team, "kind": kind, "kind_label": JobKind(kind).label,
                                                  "form": form, "preview": preview, "templates": templates,
                                                  "cost": _cost(form, prices),
                                                  "prices": {pk: [str(p), c] for pk, (p, c) in prices.items()},
                                                  "estimate": estimate, "budget_hold": holds.team_held(team)},
                  status=400 if form.errors else 200)


def _cost(form, prices) -> str:
    """The estimate for what the form holds (typed, else its initial values); the page's script keeps it current."""
    def value(name):
        raw = form[name].value()
        try:
            return int(getattr(raw, "pk", raw))
        except (TypeError, ValueError):
            return None
    flavor, workers, gpus = value("flavor"), value("workers"), value("gpus_per_worker")
    if flavor is None or workers is None or gpus is None:
        return ""
    return cost.estimate_sentence(units=workers * gpus, price=prices.get(flavor),
                                  max_runtime_minutes=value("max_runtime_minutes"))


def _feasibility_errors(form, team, kind: str) -> None:
    """The feasibility check's errors on a form that has errors of its own, as far as its fields are valid."""
    data = form.cleaned_data
    if not all(name in data for name in ("flavor", "workers", "gpus_per_worker")):
        return
    tier = data.get("priority_tier") or form.fields["priority_tier"].queryset.first()
    try:
        services.job_check_feasible(team=team, flavor=data["flavor"], tier=tier, workers=data["workers"],
                                    gpus_per_worker=data["gpus_per_worker"], kind=kind,
                                    cpu_per_worker=data.get("cpu_per_worker") or 0,
                                    memory_gib_per_worker=data.get("memory_gib_per_worker") or 0)
    except ValidationError as exc:
        add_service_errors(form, exc)


def _preview(team, kind, fields) -> str:
    """Exactly what would be applied, with a placeholder for the id the job gets when it is saved."""
    job = Job(team=team, cluster=fields["flavor"].cluster, kind=kind, **fields)
    job.pk = 0
    return yamltext.dump_all(job_manifests(selectors.job_spec(job)))


def _status_context(request, job: Job) -> dict:
    role = tenant_selectors.team_role(user=request.user, team=job.team)
    return {
        "job": job,
        "why": selectors.why_waiting(job=job),
        "ahead": selectors.jobs_ahead(job=job)[:20] if job.state == "queued" else [],
        "can_act": role in (Role.ADMIN, Role.MEMBER),
        # What services.job_cancel allows: a member cancels only her own jobs, a team admin anyone's.
        "can_cancel": role == Role.ADMIN or (role == Role.MEMBER and job.submitted_by_id == request.user.pk),
        "outcome": outcome.explain(job.state, job.state_message),
        "placed": placement.placement_sentence(job, selectors.spot_flavor_names(cluster=job.cluster)),
        "spot_warning": placement.SPOT_WARNING if job.spot_allowed else "",
    }


@login_required
def job_detail(request, pk):
    job = selectors.job_get(user=request.user, pk=pk)
    if request.htmx and request.htmx.target == "job-status":
        # The page polls the part that changes (state, why waiting, timeline) while the job is active.
        return render(request, "jobs/_status.html", _status_context(request, job))
    manifests = selectors.job_desired(job=job) or job_manifests(selectors.job_spec(job))
    return render(request, "jobs/job_detail.html", {**_status_context(request, job),
                                                    "command": shlex.join([*job.command, *job.args]),
                                                    "manifests": yamltext.dump_all(manifests)})


@login_required
@require_GET
def queue(request, cluster_name):
    """A cluster's queues as the user may see them (KueueViz's and Volcano's queue views): each team's waiting jobs
    in admission order with their position, its quota per flavor (nominal, in use, borrowed, unused and so lendable)
    and the cohort tree. The rows are the database's, which the cluster watcher keeps live; the page re-reads them."""
    clusters = tenant_selectors.queue_cluster_list(user=request.user)
    cluster = next((c for c in clusters if c.name == cluster_name), None)
    if cluster is None:
        raise Http404("No such cluster")
    team = None
    if request.GET.get("team"):
        team = tenant_selectors.team_get(user=request.user, slug=request.GET["team"])
    visible = {t.pk for t in tenant_selectors.team_list(user=request.user)}
    shares = [row for row in fair_share.fair_shares(cluster=cluster)
              if (row.department or row.team.pk in visible) and (team is None or row.team.pk == team.pk)]
    return render(request, "jobs/queue.html", {
        "cluster": cluster, "clusters": clusters, "team": team,
        "queues": selectors.cluster_queue(user=request.user, cluster=cluster, team=team),
        "quota": [{"team": row.team.slug, "flavor": name, "nominal": nominal, "in_use": used,
                   "borrowed": max(0, used - nominal), "unused": max(0, nominal - used)}
                  for row in shares if not row.department for name, (nominal, used) in row.flavors.items()],
        "tree": _cohort_tree(shares),
    })


def _cohort_tree(rows) -> list[tuple[str, list]]:
    """(cohort, [team rows]) in page order: the teams under the cohort their queue borrows in."""
    tree: dict[str, list] = {}
    for row in rows:
        if not row.department:
            tree.setdefault(row.cohort or "", []).append(row)
    return sorted(tree.items())


@login_required
def job_pods(request, pk):
    job = selectors.job_get(user=request.user, pk=pk)
    try:
        pods, error = selectors.job_pods(job=job), ""
    except KubeError as exc:
        pods, error = [], str(exc)
    return render(request, "jobs/_pods.html", {"job": job, "pods": pods, "error": error})


@login_required
@require_GET
def job_logs_download(request, pk):
    """Every pod's log as one text file (up to LOG_DOWNLOAD_LINES lines a pod), for reading beyond the page's tail."""
    job = selectors.job_get(user=request.user, pk=pk)
    try:
        pods = selectors.job_pods(job=job, tail_lines=LOG_DOWNLOAD_LINES)
    except KubeError as exc:
        return HttpResponse(f"The cluster {job.cluster.name} could not be read: {exc}\n", status=503,
                            content_type="text/plain; charset=utf-8")
    text = "".join(f"==> {pod['name']} ({pod['phase']}) <==\n{pod['log'].rstrip(chr(10))}\n" for pod in pods)
    response = HttpResponse(text or "No pods.\n", content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{job.object_name}-logs.txt"'
    return response


@require_POST
@login_required
def job_action(request, pk, action):
    job = selectors.job_get(user=request.user, pk=pk)
    try:
        if action == "cancel":
            asked = confirmed_write(
                request, lambda: services.job_cancel(actor=request.user, job=job, source_ip=source_ip(request)),
                question=f"Cancel job {job.name}?", consequence="confirm/job_cancel.txt", context={"job": job},
                yes="Yes, cancel the job", back=reverse("jobs:job-detail", args=[job.pk]))
            if isinstance(asked, HttpResponse):
                return asked
            messages.success(request, "Cancelling: the job's objects are being deleted.")
        elif action == "resubmit":
            job = services.job_resubmit(actor=request.user, job=job, source_ip=source_ip(request))
            messages.success(request, f"Resubmitted as job #{job.pk}.")
        else:
            raise Http404("Unknown action")
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("jobs:job-detail", pk=job.pk)


@require_POST
@login_required
def template_delete(request, slug, pk):
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    template = selectors.job_template_get(team=team, pk=pk)
    services.job_template_delete(actor=request.user, template=template, source_ip=source_ip(request))
    messages.success(request, f"Template {template.name} deleted.")
    return redirect("jobs:job-submit", slug=slug, kind=template.kind)


@login_required
def job_sooner(request, pk):
    """GET: the waiting job's alternatives with their estimates (a fragment of its page). POST: resubmit it with
    one of them (`field`, `value`), cancelling the original."""
    job = selectors.job_get(user=request.user, pk=pk)
    if request.method == "POST":
        field, value = request.POST.get("field", ""), request.POST.get("value", "")
        change = {field: int(value) if field in ("workers", "gpus_per_worker", "flavor") and value.isdigit()
                  else value}
        try:
            new = sooner.job_resubmit_changed(actor=request.user, job=job, change=change,
                                              source_ip=source_ip(request))
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
            return redirect("jobs:job-detail", pk=job.pk)
        messages.success(request, f"Resubmitted as job #{new.pk}; job #{job.pk} is being cancelled.")
        return redirect("jobs:job-detail", pk=new.pk)
    role = tenant_selectors.team_role(user=request.user, team=job.team)
    return render(request, "jobs/_sooner.html", {"job": job, "alternatives": sooner.job_alternatives(job=job),
                                                 "can_act": role in (Role.ADMIN, Role.MEMBER)})
