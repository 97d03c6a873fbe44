"""The platform team's console pages for tenancy: clusters and their shared objects, teams, the audit log."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from portal import yamltext
from portal.desired import cluster_desired

# platform_admin_required: anonymous → login page, signed-in non-staff → 403 (shared with the quota pages).
from portal.http import add_service_errors, confirmed_write, platform_admin_required, source_ip, write_from_form
from portal.kube import KubeError
from portal.schedulers import backend_for

from . import objects, selectors, services, topology
from .choices import TeamState
from .desired import tier_specs
from .filters import AuditEventFilter
from .forms import ClusterForm, NamespaceDeletionForm, TeamCreateForm, TeamStateForm
from .models import Cluster

AUDIT_PAGE_SIZE = 50


# --- console: clusters ---------------------------------------------------------------------------------------


@platform_admin_required
def console_cluster_create(request):
    """GET: the form. POST with `test`: try the connection and show the answer, keeping what was typed. POST: save
    it (namespaces for every team follow through reconcile) and open its page."""
    form = ClusterForm(request.POST or None)
    probe = None
    if request.method == "POST" and form.is_valid():
        if "test" in request.POST:
            ok, detail = selectors.cluster_reachable(Cluster(**form.connection_fields()))
            probe = {"ok": ok, "detail": detail}
        else:
            try:
                cluster = services.cluster_create(actor=request.user, source_ip=source_ip(request),
                                                  **form.registration_fields())
            except ValidationError as exc:
                add_service_errors(form, exc)
            else:
                messages.success(request, f"Cluster {cluster.name} registered; its objects and the teams' "
                                          "namespaces are being applied.")
                return redirect("tenants:cluster-detail", name=cluster.name)
    return render(request, "tenants/console/cluster_form.html", {"form": form, "probe": probe},
                  status=400 if form.errors else 200)


@platform_admin_required
@require_GET
def console_cluster_list(request):
    clusters = list(selectors.cluster_list().prefetch_related("flavors"))
    for cluster in clusters:
        # In whole GPUs: a MIG slice, an MPS share and a GPU are not the same unit, so units do not add up.
        flavors = list(cluster.flavors.all())
        cluster.flavor_count = len(flavors)
        cluster.total_gpus = round(float(sum(f.gpu_equivalents for f in flavors)), 1)
    return render(request, "tenants/console/cluster_list.html", {"clusters": clusters})


@platform_admin_required
@require_GET
def console_cluster_detail(request, name):
    cluster = selectors.cluster_get(name=name)
    statuses = cluster.objects_status or objects.pending(cluster_desired(cluster=cluster, tiers=tier_specs()))

    def url_for(status):
        group, version = objects.api_version_parts(status["apiVersion"])
        return reverse("tenants:cluster-object-detail", args=[cluster.name, group, version, status["kind"],
                                                              status["name"]])

    volcano = backend_for(cluster).discovers_hypernodes and cluster.topology_levels
    return render(request, "tenants/console/cluster_detail.html", {
        "cluster": cluster,
        "flavors": selectors.flavor_list(cluster=cluster).order_by("name"),
        "objects": objects.object_rows(statuses, url_for),
        "volcano_discovery": topology.volcano_discovery_config(cluster.topology_levels) if volcano else "",
        "volcano_config": (topology.VOLCANO_CONFIG_NAMESPACE, topology.VOLCANO_CONFIG_NAME,
                           topology.VOLCANO_CONFIG_KEY),
    })


@platform_admin_required
@require_GET
def console_cluster_hypernodes(request, name):
    """The HyperNodes Volcano's discoverer built from the cluster's nodes, read live (a fragment for the cluster
    page): per tier, each with its level's value and member count."""
    cluster = selectors.cluster_get(name=name)
    try:
        report, error = selectors.discovered_hypernodes(cluster=cluster), ""
    except KubeError as exc:
        report, error = {"rows": [], "missing": [], "strays": []}, str(exc)
    return render(request, "tenants/console/_hypernodes.html", {"cluster": cluster, "error": error, **report})


@platform_admin_required
@require_POST
def console_cluster_retry(request, name):
    cluster = selectors.cluster_get(name=name)
    services.reconcile_retry(actor=request.user, row=cluster, source_ip=source_ip(request))
    messages.success(request, f"Reconcile of the cluster-wide objects of {cluster.name} queued.")
    return redirect("tenants:cluster-detail", name=cluster.name)


def _cluster_object(name, group, version, kind, object_name):
    cluster = selectors.cluster_get(name=name)
    desired = cluster_desired(cluster=cluster, tiers=tier_specs())
    obj = objects.find_object(desired, objects.api_version_from_parts(group, version), kind, object_name)
    return cluster, obj


@platform_admin_required
@require_GET
def console_cluster_object_detail(request, name, group, version, kind, object_name):
    cluster, obj = _cluster_object(name, group, version, kind, object_name)
    return render(request, "tenants/object_detail.html", {
        "cluster": cluster, "obj": obj, "desired_yaml": yamltext.dump(obj),
        "status": objects.object_status(cluster, obj),
        "live_url": reverse("tenants:cluster-object-live", args=[name, group, version, kind, object_name]),
        "back_url": reverse("tenants:cluster-detail", args=[cluster.name]),
    })


@platform_admin_required
@require_GET
def console_cluster_object_live(request, name, group, version, kind, object_name):
    cluster, obj = _cluster_object(name, group, version, kind, object_name)
    return objects.live_response(request, cluster, obj, back_url=reverse(
        "tenants:cluster-object-detail", args=[name, group, version, kind, object_name]))


# --- console: teams ------------------------------------------------------------------------------------------


def _console_teams_page(request, *, create_form=None, confirm_for=None, status=200):
    teams = selectors.dashboard_teams(user=request.user).select_related("parent")
    rows = [{"team": team,
             "confirm_form": confirm_for[1] if confirm_for and confirm_for[0] == team.pk
             else NamespaceDeletionForm(auto_id=f"id_t{team.pk}_%s")}
            for team in teams]
    return render(request, "tenants/console/team_list.html", {
        "rows": rows,
        "create_form": create_form or TeamCreateForm(parents=selectors.team_list(user=request.user)),
        "states": TeamState,
    }, status=status)


@platform_admin_required
def console_team_list(request):
    if request.method != "POST":
        return _console_teams_page(request)
    form = TeamCreateForm(request.POST, parents=selectors.team_list(user=request.user))
    if form.is_valid():
        done = write_from_form(
            request, form, lambda: services.team_create(actor=request.user, source_ip=source_ip(request),
                                                        **form.cleaned_data),
            message=lambda team: f"Team {team.name} created; its namespaces are being set up.", to="tenants:team-list")
        if done:
            return done
    return _console_teams_page(request, create_form=form)


@platform_admin_required
@require_POST
def console_team_set_state(request, slug):
    team = selectors.team_get(user=request.user, slug=slug)
    form = TeamStateForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"{team.name}: choose active, suspended or archived.")
        return redirect("tenants:team-list")
    state = form.cleaned_data["state"]
    verb = {TeamState.SUSPENDED: "suspend", TeamState.ARCHIVED: "archive"}.get(state)  # reactivating takes nothing

    def write():
        return services.team_set_state(actor=request.user, team=team, state=state, source_ip=source_ip(request))

    try:
        done = write() if verb is None else confirmed_write(
            request, write, question=f"{verb.capitalize()} {team.name}?", consequence="confirm/team_state.txt",
            context={"state": state}, yes=f"Yes, {verb} it", back=reverse("tenants:team-list"))
        if isinstance(done, HttpResponse):
            return done
        team = done
    except ValidationError as exc:
        messages.error(request, f"{team.name}: {' '.join(exc.messages)}")
    else:
        messages.success(request, f"{team.name} is now {team.get_state_display().lower()}.")
    return redirect("tenants:team-list")


@platform_admin_required
@require_POST
def console_team_delete_namespaces(request, slug):
    team = selectors.team_get(user=request.user, slug=slug)
    form = NamespaceDeletionForm(request.POST, auto_id=f"id_t{team.pk}_%s")
    if form.is_valid():
        done = write_from_form(
            request, form, lambda: services.team_confirm_namespace_deletion(
                actor=request.user, team=team, confirmation=form.cleaned_data["confirmation"],
                source_ip=source_ip(request)),
            message=lambda _: f"The namespaces of {team.name} are being deleted.", to="tenants:team-list")
        if done:
            return done
    return _console_teams_page(request, confirm_for=(team.pk, form))


# --- console: audit log --------------------------------------------------------------------------------------


@platform_admin_required
@require_GET
def console_audit_list(request):
    events = selectors.audit_event_list(user=request.user)
    event_filter = AuditEventFilter(request.GET or None, queryset=events, request=request,
                                    teams=selectors.team_list(user=request.user))
    page = Paginator(event_filter.qs, AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "tenants/console/audit_list.html", {
        "filter": event_filter, "page": page, "query": query.urlencode(),
    })


