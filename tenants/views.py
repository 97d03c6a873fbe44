"""Pages of the tenancy app: dashboard, team page, object YAML, and the platform admins' console.

Views stay thin: read through selectors (already scoped to the user), write through services, put a
service's ValidationError back on the form, and never answer bad input with a 500.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, Sum
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

# platform_admin_required: anonymous → login page, signed-in non-staff → 403 (shared with the quota pages).
from portal import yamltext
from portal.http import add_service_errors, platform_admin_required, source_ip
from portal.kube import KubeError

from . import selectors, services
from .choices import SyncState, TeamState
from .filters import AuditEventFilter
from .forms import (
    AccessTokenForm,
    MemberAddForm,
    MemberRemoveForm,
    MemberRoleForm,
    NamespaceDeletionForm,
    TeamCreateForm,
    TeamStateForm,
)

CORE_GROUP = "core"  # stands for the empty API group of v1 objects in URLs
AUDIT_PAGE_SIZE = 50


# --- apiVersion in URLs ----------------------------------------------------------------------------------------


def api_version_parts(api_version: str) -> tuple[str, str]:
    """'rbac.authorization.k8s.io/v1' → ('rbac.authorization.k8s.io', 'v1'); 'v1' → ('core', 'v1')."""
    group, _, version = api_version.rpartition("/")
    return group or CORE_GROUP, version


def api_version_from_parts(group: str, version: str) -> str:
    return version if group == CORE_GROUP else f"{group}/{version}"


def _object_rows(statuses: list[dict], url_for) -> list[dict]:
    return [{**status, "url": url_for(status)} for status in statuses]


def _pending(desired: list[dict]) -> list[dict]:
    """Desired objects not yet reported by a reconcile, shaped like objects_status entries."""
    return [{"apiVersion": o["apiVersion"], "kind": o["kind"], "namespace": o["metadata"].get("namespace", ""),
             "name": o["metadata"]["name"], "state": "pending", "message": ""} for o in desired]


def _find(desired: list[dict], api_version: str, kind: str, name: str) -> dict:
    for obj in desired:
        if obj["apiVersion"] == api_version and obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise Http404("Not one of the objects the portal manages here")


def _to_yaml(obj: dict) -> str:
    return yamltext.dump(obj, default_flow_style=False)


def _live_yaml(cluster, obj: dict) -> dict:
    """The live object as YAML, or why there is none; a cluster that cannot be read is a message, not a 500."""
    meta = obj["metadata"]
    try:
        live = selectors.live_object(cluster=cluster, api_version=obj["apiVersion"], kind=obj["kind"],
                                     name=meta["name"], namespace=meta.get("namespace"))
    except KubeError as exc:
        return {"error": str(exc)}
    if live is None:
        return {"absent": True}
    live.get("metadata", {}).pop("managedFields", None)
    return {"yaml": _to_yaml(live)}


# --- dashboard and team page ---------------------------------------------------------------------------------


@login_required
@require_GET
def dashboard(request):
    teams = selectors.dashboard_teams(user=request.user).select_related("parent")
    return render(request, "tenants/dashboard.html", {
        "teams": teams, "is_platform_admin": selectors.is_platform_admin(request.user),
    })


def _team_namespace_rows(team, memberships) -> list[dict]:
    rows = []
    for row in selectors.team_namespaces(team=team):
        statuses = row.objects_status or _pending(
            selectors.team_namespace_desired(team_namespace=row, memberships=memberships))

        def url_for(status, cluster_name=row.cluster.name):
            group, version = api_version_parts(status["apiVersion"])
            return reverse("tenants:object-detail", args=[team.slug, cluster_name, group, version,
                                                          status["kind"], status["name"]])

        rows.append({"row": row, "objects": _object_rows(statuses, url_for)})
    return rows


def _team_page(request, team, *, add_form=None, member_form=None, status=200):
    memberships = list(selectors.team_memberships(team=team))
    can_manage = selectors.can_manage_members(user=request.user, team=team)
    namespaces = _team_namespace_rows(team, memberships)
    members = [{"membership": m, "role_form": MemberRoleForm(initial={"username": m.user.username, "role": m.role},
                                                             auto_id=f"id_m{m.pk}_%s")}
               for m in memberships]
    return render(request, "tenants/team_detail.html", {
        "team": team,
        "members": members,
        "can_manage": can_manage,
        "is_platform_admin": selectors.is_platform_admin(request.user),
        "add_form": add_form or MemberAddForm(),
        "member_form": member_form,
        "namespaces": namespaces,
        # While a namespace is still converging the section refreshes itself (HTMX); settled pages stay still.
        "settling": any(item["row"].sync_state in (SyncState.PENDING, SyncState.RETRYING) for item in namespaces),
    }, status=status)


@login_required
@require_GET
def team_detail(request, slug):
    team = selectors.team_get(user=request.user, slug=slug)
    return _team_page(request, team)


def _team_for_member_admin(request, slug):
    team = selectors.team_get(user=request.user, slug=slug)
    if not selectors.can_manage_members(user=request.user, team=team):
        raise PermissionDenied("Only the team's admins can change its members.")
    return team


@login_required
@require_POST
def membership_add(request, slug):
    team = _team_for_member_admin(request, slug)
    form = MemberAddForm(request.POST)
    if form.is_valid():
        try:
            services.membership_set(actor=request.user, team=team, user=form.user, role=form.cleaned_data["role"],
                                    source_ip=source_ip(request))
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"{form.user.username} is now {form.cleaned_data['role']} of {team.name}.")
            return redirect("tenants:team-detail", slug=team.slug)
    return _team_page(request, team, add_form=form)


def _member_from_form(team, form):
    membership = selectors.team_memberships(team=team).filter(user__username=form.cleaned_data["username"]).first()
    if membership is None:
        form.add_error(None, f"{form.cleaned_data['username']} is not a member of {team.name}.")
    return membership


@login_required
@require_POST
def membership_update(request, slug):
    team = _team_for_member_admin(request, slug)
    form = MemberRoleForm(request.POST)
    if form.is_valid() and (membership := _member_from_form(team, form)):
        try:
            services.membership_set(actor=request.user, team=team, user=membership.user,
                                    role=form.cleaned_data["role"], source_ip=source_ip(request))
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"{membership.user.username} is now {form.cleaned_data['role']}.")
            return redirect("tenants:team-detail", slug=team.slug)
    return _team_page(request, team, member_form=form)


@login_required
@require_POST
def membership_remove(request, slug):
    team = _team_for_member_admin(request, slug)
    form = MemberRemoveForm(request.POST)
    if form.is_valid() and (membership := _member_from_form(team, form)):
        try:
            services.membership_remove(actor=request.user, team=team, user=membership.user,
                                       source_ip=source_ip(request))
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"{membership.user.username} was removed from {team.name}.")
            return redirect("tenants:team-detail", slug=team.slug)
    return _team_page(request, team, member_form=form)


def _team_namespace(request, slug, cluster_name):
    team = selectors.team_get(user=request.user, slug=slug)
    row = selectors.team_namespaces(team=team).filter(cluster__name=cluster_name).first()
    if row is None:
        raise Http404("The team has no namespace in that cluster")
    return team, row


@platform_admin_required
@require_POST
def namespace_retry(request, slug, cluster_name):
    team, row = _team_namespace(request, slug, cluster_name)
    services.reconcile_retry(actor=request.user, row=row, source_ip=source_ip(request))
    messages.success(request, f"Reconcile of {team.namespace} in {row.cluster.name} queued.")
    return redirect("tenants:team-detail", slug=team.slug)


# --- object YAML ---------------------------------------------------------------------------------------------


def _team_object(request, slug, cluster_name, group, version, kind, name):
    team, row = _team_namespace(request, slug, cluster_name)
    obj = _find(selectors.team_namespace_desired(team_namespace=row), api_version_from_parts(group, version),
                kind, name)
    return team, row, obj


def _object_status(row, obj) -> dict:
    meta = obj["metadata"]
    for status in row.objects_status:
        if (status["apiVersion"], status["kind"], status["name"]) == (obj["apiVersion"], obj["kind"], meta["name"]):
            return status
    return {"state": "pending", "message": ""}


@login_required
@require_GET
def object_detail(request, slug, cluster_name, group, version, kind, name):
    team, row, obj = _team_object(request, slug, cluster_name, group, version, kind, name)
    return render(request, "tenants/object_detail.html", {
        "team": team, "cluster": row.cluster, "obj": obj, "desired_yaml": _to_yaml(obj),
        "status": _object_status(row, obj),
        "live_url": reverse("tenants:object-live", args=[slug, cluster_name, group, version, kind, name]),
        "back_url": reverse("tenants:team-detail", args=[team.slug]),
    })


@login_required
@require_GET
def object_live(request, slug, cluster_name, group, version, kind, name):
    team, row, obj = _team_object(request, slug, cluster_name, group, version, kind, name)
    return _live_response(request, row.cluster, obj, back_url=reverse(
        "tenants:object-detail", args=[slug, cluster_name, group, version, kind, name]))


def _live_response(request, cluster, obj, *, back_url):
    template = "tenants/_live_object.html" if request.htmx else "tenants/object_live.html"
    return render(request, template, {"cluster": cluster, "obj": obj, "live": _live_yaml(cluster, obj),
                                      "back_url": back_url})


# --- console: clusters ---------------------------------------------------------------------------------------


@platform_admin_required
@require_GET
def console_cluster_list(request):
    clusters = selectors.cluster_list().annotate(flavor_count=Count("flavors"), total_capacity=Sum("flavors__capacity"))
    return render(request, "tenants/console/cluster_list.html", {"clusters": clusters})


@platform_admin_required
@require_GET
def console_cluster_detail(request, name):
    cluster = selectors.cluster_get(name=name)
    statuses = cluster.objects_status or _pending(selectors.cluster_desired(cluster=cluster))

    def url_for(status):
        group, version = api_version_parts(status["apiVersion"])
        return reverse("tenants:cluster-object-detail", args=[cluster.name, group, version, status["kind"],
                                                              status["name"]])

    return render(request, "tenants/console/cluster_detail.html", {
        "cluster": cluster,
        "flavors": selectors.flavor_list(cluster=cluster).order_by("name"),
        "objects": _object_rows(statuses, url_for),
    })


@platform_admin_required
@require_POST
def console_cluster_retry(request, name):
    cluster = selectors.cluster_get(name=name)
    services.reconcile_retry(actor=request.user, row=cluster, source_ip=source_ip(request))
    messages.success(request, f"Reconcile of the cluster-wide objects of {cluster.name} queued.")
    return redirect("tenants:cluster-detail", name=cluster.name)


def _cluster_object(name, group, version, kind, object_name):
    cluster = selectors.cluster_get(name=name)
    obj = _find(selectors.cluster_desired(cluster=cluster), api_version_from_parts(group, version), kind,
                object_name)
    return cluster, obj


@platform_admin_required
@require_GET
def console_cluster_object_detail(request, name, group, version, kind, object_name):
    cluster, obj = _cluster_object(name, group, version, kind, object_name)
    return render(request, "tenants/object_detail.html", {
        "cluster": cluster, "obj": obj, "desired_yaml": _to_yaml(obj), "status": _object_status(cluster, obj),
        "live_url": reverse("tenants:cluster-object-live", args=[name, group, version, kind, object_name]),
        "back_url": reverse("tenants:cluster-detail", args=[cluster.name]),
    })


@platform_admin_required
@require_GET
def console_cluster_object_live(request, name, group, version, kind, object_name):
    cluster, obj = _cluster_object(name, group, version, kind, object_name)
    return _live_response(request, cluster, obj, back_url=reverse(
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
        try:
            team = services.team_create(actor=request.user, source_ip=source_ip(request), **form.cleaned_data)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"Team {team.name} created; its namespaces are being set up.")
            return redirect("tenants:team-list")
    return _console_teams_page(request, create_form=form)


@platform_admin_required
@require_POST
def console_team_set_state(request, slug):
    team = selectors.team_get(user=request.user, slug=slug)
    form = TeamStateForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"{team.name}: choose active, suspended or archived.")
        return redirect("tenants:team-list")
    try:
        team = services.team_set_state(actor=request.user, team=team, state=form.cleaned_data["state"],
                                       source_ip=source_ip(request))
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
        try:
            services.team_confirm_namespace_deletion(actor=request.user, team=team,
                                                     confirmation=form.cleaned_data["confirmation"],
                                                     source_ip=source_ip(request))
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"The namespaces of {team.name} are being deleted.")
            return redirect("tenants:team-list")
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


# --- personal access tokens ----------------------------------------------------------------------------------


def _tokens_page(request, *, form=None, new_token=None, status=200):
    return render(request, "tenants/token_list.html", {
        "tokens": selectors.access_token_list(user=request.user), "form": form or AccessTokenForm(),
        "new_token": new_token, "now": timezone.now(),
    }, status=status)


@login_required
def token_list(request):
    """The user's tokens; creating one shows its secret on this response only (it is never stored)."""
    if request.method != "POST":
        return _tokens_page(request)
    form = AccessTokenForm(request.POST)
    if form.is_valid():
        try:
            token, raw = services.access_token_create(actor=request.user, name=form.cleaned_data["name"],
                                                      expires_in_days=form.cleaned_data["expires_in_days"],
                                                      source_ip=source_ip(request))
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            response = _tokens_page(request, new_token={"token": token, "secret": raw})
            response["Cache-Control"] = "no-store"  # the secret must not be kept by a browser or proxy cache
            return response
    return _tokens_page(request, form=form, status=400)


@login_required
@require_POST
def token_revoke(request, pk):
    token = selectors.access_token_get(user=request.user, pk=pk)
    services.access_token_revoke(actor=request.user, token=token, source_ip=source_ip(request))
    messages.success(request, f"Token “{token.name}” revoked; scripts using it now get 401.")
    return redirect("tenants:token-list")
