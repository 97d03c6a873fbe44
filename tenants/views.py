"""Pages of the tenancy app a team sees: dashboard, team page and its members, a team's Kubernetes objects (desired
and live YAML), and personal access tokens. The platform admins' console is console_views.py.

Views stay thin: read through selectors (already scoped to the user), write through services, put a
service's ValidationError back on the form, and never answer bad input with a 500.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from portal import yamltext
from portal.desired import team_namespace_desired

# platform_admin_required: anonymous → login page, signed-in non-staff → 403 (shared with the quota pages).
from portal.http import add_service_errors, confirmed_write, platform_admin_required, source_ip, write_from_form
from portal.reconciled import SyncState

from . import selectors, services
from .choices import Role, TeamState
from .forms import (
    AccessTokenForm,
    MemberAddForm,
    MemberRemoveForm,
    MemberRoleForm,
)
from .objects import (
    api_version_from_parts,
    api_version_parts,
    find_object,
    live_response,
    object_rows,
    object_status,
    pending,
)

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
        statuses = row.objects_status or pending(
            team_namespace_desired(team_namespace=row, memberships=memberships))

        def url_for(status, cluster_name=row.cluster.name):
            group, version = api_version_parts(status["apiVersion"])
            return reverse("tenants:object-detail", args=[team.slug, cluster_name, group, version,
                                                          status["kind"], status["name"]])

        rows.append({"row": row, "objects": object_rows(statuses, url_for)})
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
        "can_submit": team.state == TeamState.ACTIVE and selectors.team_role(user=request.user, team=team) in (
            Role.ADMIN, Role.MEMBER),
        "submit_teams": [team],
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


def _membership_change(request, team, form, *, user, role: str | None, form_name: str):
    """Gives `user` the role in the team, or removes them when role is None; on success back to the team page
    with what changed, on a service refusal the team page again with the reason beside the form."""
    if role is None:
        write, done = (lambda: confirmed_write(
            request, lambda: services.membership_remove(actor=request.user, team=team, user=user,
                                                        source_ip=source_ip(request)),
            question=f"Remove {user.username} from {team.name}?", consequence="confirm/member_remove.txt",
            context={"username": user.username}, yes=f"Yes, remove {user.username}",
            back=reverse("tenants:team-detail", args=[team.slug])), f"was removed from {team.name}")
    else:
        write, done = (lambda: services.membership_set(actor=request.user, team=team, user=user, role=role,
                                                       source_ip=source_ip(request)),
                       f"is now {role} of {team.name}")
    return (write_from_form(request, form, write, message=lambda _: f"{user.username} {done}.",
                            to="tenants:team-detail", slug=team.slug)
            or _team_page(request, team, **{form_name: form}))


def _member_from_form(team, form):
    membership = selectors.membership_named(team=team, username=form.cleaned_data["username"])
    if membership is None:
        form.add_error(None, f"{form.cleaned_data['username']} is not a member of {team.name}.")
    return membership


@login_required
@require_POST
def membership_add(request, slug):
    team = _team_for_member_admin(request, slug)
    form = MemberAddForm(request.POST)
    if not form.is_valid():
        return _team_page(request, team, add_form=form)
    return _membership_change(request, team, form, user=form.user, role=form.cleaned_data["role"],
                              form_name="add_form")


def _member_post(request, slug, form_class):
    """A role change (MemberRoleForm) or a removal (MemberRemoveForm, which has no role) of an existing member."""
    team = _team_for_member_admin(request, slug)
    form = form_class(request.POST)
    if not (form.is_valid() and (membership := _member_from_form(team, form))):
        return _team_page(request, team, member_form=form)
    return _membership_change(request, team, form, user=membership.user, role=form.cleaned_data.get("role"),
                              form_name="member_form")


@login_required
@require_POST
def membership_update(request, slug):
    return _member_post(request, slug, MemberRoleForm)


@login_required
@require_POST
def membership_remove(request, slug):
    return _member_post(request, slug, MemberRemoveForm)


def _team_namespace(request, slug, cluster_name):
    team = selectors.team_get(user=request.user, slug=slug)
    return team, selectors.team_namespace_in(team=team, cluster_name=cluster_name)


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
    obj = find_object(team_namespace_desired(team_namespace=row), api_version_from_parts(group, version), kind, name)
    return team, row, obj


@login_required
@require_GET
def object_detail(request, slug, cluster_name, group, version, kind, name):
    team, row, obj = _team_object(request, slug, cluster_name, group, version, kind, name)
    return render(request, "tenants/object_detail.html", {
        "team": team, "cluster": row.cluster, "obj": obj, "desired_yaml": yamltext.dump(obj),
        "status": object_status(row, obj),
        "live_url": reverse("tenants:object-live", args=[slug, cluster_name, group, version, kind, name]),
        "back_url": reverse("tenants:team-detail", args=[team.slug]),
    })


@login_required
@require_GET
def object_live(request, slug, cluster_name, group, version, kind, name):
    team, row, obj = _team_object(request, slug, cluster_name, group, version, kind, name)
    return live_response(request, row.cluster, obj, back_url=reverse(
        "tenants:object-detail", args=[slug, cluster_name, group, version, kind, name]))


# --- personal access tokens ----------------------------------------------------------------------------------


def _tokens_page(request, *, form=None, new_token=None, status=200):
    teams = selectors.member_team_list(user=request.user)
    names = dict(teams.values_list("pk", "slug"))
    tokens = list(selectors.access_token_list(user=request.user))
    for token in tokens:
        token.team_slugs = [names.get(pk, "a team you left") for pk in token.team_ids]
    return render(request, "tenants/token_list.html", {
        "tokens": tokens, "form": form or AccessTokenForm(teams=teams),
        "new_token": new_token, "now": timezone.now(),
    }, status=status)


NEW_TOKEN_KEY = "new_access_token"


@login_required
def token_list(request):
    """The user's tokens; creating one redirects to this page, which shows its secret once (kept in the session
    only until then; the database keeps a hash)."""
    if request.method != "POST":
        # Shown once, on the page the creation redirects to: a reload neither creates another token nor shows it.
        created = request.session.pop(NEW_TOKEN_KEY, None)
        token = selectors.access_token_list(user=request.user).filter(pk=created["pk"]).first() if created else None
        if token is None:
            return _tokens_page(request)
        response = _tokens_page(request, new_token={"token": token, "secret": created["secret"]})
        response["Cache-Control"] = "no-store"  # the secret must not be kept by a browser or proxy cache
        return response
    form = AccessTokenForm(request.POST, teams=selectors.member_team_list(user=request.user))
    if form.is_valid():
        try:
            token, raw = services.access_token_create(actor=request.user, name=form.cleaned_data["name"],
                                                      expires_in_days=form.cleaned_data["expires_in_days"],
                                                      read_only=form.cleaned_data["access"] == "read",
                                                      teams=form.cleaned_data["teams"],
                                                      source_ip=source_ip(request))
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            request.session[NEW_TOKEN_KEY] = {"pk": token.pk, "secret": raw}
            return redirect("tenants:token-list")
    return _tokens_page(request, form=form, status=400)


@login_required
@require_POST
def token_revoke(request, pk):
    token = selectors.access_token_get(user=request.user, pk=pk)
    asked = confirmed_write(
        request, lambda: services.access_token_revoke(actor=request.user, token=token, source_ip=source_ip(request)),
        question=f"Revoke token “{token.name}”?", consequence="confirm/token_revoke.txt", context={},
        yes="Yes, revoke it", back=reverse("tenants:token-list"))
    if isinstance(asked, HttpResponse):
        return asked
    messages.success(request, f"Token “{token.name}” revoked; scripts using it now get 401.")
    return redirect("tenants:token-list")
