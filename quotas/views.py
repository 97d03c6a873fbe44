"""Quota pages: a team's quotas (with units in use) and requests, the request form, the platform admins' approval
queue, capacity overview, flavors and priority tiers. Reads through selectors, writes through services."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from backends import backend_for
from portal.http import add_service_errors, confirmed_write, platform_admin_required, source_ip, write_from_form
from tenants import selectors as tenant_selectors
from tenants import services as tenant_services
from tenants.choices import Role
from tenants.sharing import cluster_setup, sharing_isolation

from . import fair_share, reservations, selectors, services
from .choices import RequestState
from .forms import (
    ApproveForm,
    FairShareWeightForm,
    GpuFlavorForm,
    PriorityTierForm,
    QuotaRequestForm,
    QuotaSetForm,
    RejectForm,
    ReservationForm,
)


@login_required
def team_quota(request, slug):
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    role = tenant_selectors.team_role(user=request.user, team=team)
    rows = selectors.team_held_quotas(team=team)
    return render(request, "quotas/team_quota.html", {
        "team": team,
        "rows": rows,
        "requests": selectors.team_requests(team=team)[:50],
        "reservations": selectors.reservation_list(user=request.user, team_slug=team.slug).order_by("-starts_at")[:50],
        "can_request": role in (Role.ADMIN, Role.MEMBER),
        "is_team_admin": role == Role.ADMIN,
    })


@login_required
def request_create(request, slug):
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    if tenant_selectors.team_role(user=request.user, team=team) not in (Role.ADMIN, Role.MEMBER):
        # Said before the form is filled in, not after: the service refuses viewers too.
        admins = ", ".join(tenant_selectors.team_admin_names(team=team)) or "the platform team"
        raise PermissionDenied(f"Viewers cannot request quota for {team.name}; ask a member or its admins ({admins}).")
    flavors = selectors.requestable_flavors(team=team)
    initial = {}
    renew = request.GET.get("renew")
    if renew and renew.isdigit():
        previous = selectors.team_request(team=team, pk=int(renew))
        if previous:
            initial = {"flavor": previous.flavor_id, "guaranteed": previous.guaranteed, "burst": previous.burst,
                       "cpu_cores": previous.cpu_cores, "memory_gib": previous.memory_gib,
                       "justification": f"Renewal of #{previous.pk}: {previous.justification}"}
    quotas = list(selectors.team_quotas(team=team))
    form = QuotaRequestForm(request.POST or None, flavors=flavors, initial=initial,
                            held={q.flavor_id: q for q in quotas})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            created = services.quota_request_create(actor=request.user, team=team, source_ip=source_ip(request),
                                                    **data)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"Request #{created.pk} sent to the platform team.")
            return redirect("quotas:team-quota", slug=team.slug)
    pending = selectors.team_requests(team=team).filter(state=RequestState.PENDING)
    return render(request, "quotas/request_form.html", {"team": team, "form": form, "quotas": quotas,
                                                        "pending": pending,
                                                        "calendar": _calendar_beside(request, flavors, initial)},
                  status=400 if form.errors else 200)


@require_POST
@login_required
def request_withdraw(request, pk):
    quota_request = selectors.request_get(user=request.user, pk=pk)
    try:
        asked = confirmed_write(
            request, lambda: services.quota_request_withdraw(actor=request.user, request=quota_request,
                                                            source_ip=source_ip(request)),
            question=f"Withdraw request #{pk}?", consequence="confirm/request_withdraw.txt", context={},
            yes="Yes, withdraw it", back=reverse("quotas:team-quota", args=[quota_request.team.slug]))
        if isinstance(asked, HttpResponse):
            return asked
        messages.success(request, f"Request #{pk} withdrawn.")
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("quotas:team-quota", slug=quota_request.team.slug)


@login_required
def request_list(request):
    return render(request, "quotas/request_list.html",
                  {"requests": selectors.request_list(user=request.user, requested_by=request.user)[:200],
                   "request_teams": tenant_selectors.submit_team_list(user=request.user),
                   "viewer_teams": [(team, tenant_selectors.team_admin_names(team=team))
                                    for team in tenant_selectors.viewer_team_list(user=request.user)]})


def _edited_impact(quota_request, form: ApproveForm):
    """The impact of the amounts the admin typed, as far as they are numbers; the request's own otherwise."""
    guaranteed, burst = form.amounts(default=(quota_request.guaranteed, quota_request.burst))
    return selectors.impact(flavor=quota_request.flavor, team=quota_request.team, guaranteed=guaranteed, burst=burst)


def _approval_page(request, *, bound_pk=None, bound_form=None, status=200):
    """The queue; the request just decided in error keeps its form as typed, with the errors beside the fields."""
    items = []
    for r, i in selectors.pending_with_impact(user=request.user):
        approve = ApproveForm(initial={"guaranteed": r.guaranteed, "burst": r.burst}, prefix=f"a{r.pk}")
        reject = RejectForm(prefix=f"r{r.pk}")
        if r.pk == bound_pk and isinstance(bound_form, ApproveForm):
            approve = bound_form
            i = _edited_impact(r, approve)
        elif r.pk == bound_pk:
            reject = bound_form
        items.append({"request": r, "impact": i, "approve": approve, "reject": reject})
    decided = selectors.recently_decided(user=request.user)
    return render(request, "quotas/approval_list.html", {"items": items, "decided": decided}, status=status)


@platform_admin_required
def approval_list(request):
    return _approval_page(request)


@platform_admin_required
@require_GET
def request_impact(request, pk):
    """The impact table for the amounts being typed into a request's approve form (HTMX, as the admin types)."""
    quota_request = get_object_or_404(selectors.request_list(user=request.user, state=RequestState.PENDING), pk=pk)
    effect = _edited_impact(quota_request, ApproveForm(request.GET, prefix=f"a{pk}"))
    return render(request, "quotas/_impact.html", {"r": quota_request, "i": effect})


@require_POST
@platform_admin_required
def request_decide(request, pk, decision):
    if decision not in ("approve", "reject"):
        raise Http404("Unknown decision")
    quota_request = selectors.request_get(user=request.user, pk=pk)
    form_class, prefix = (ApproveForm, f"a{pk}") if decision == "approve" else (RejectForm, f"r{pk}")
    form = form_class(request.POST, prefix=prefix)
    if form.is_valid():
        try:
            if decision == "approve":
                services.quota_request_approve(actor=request.user, request=quota_request,
                                               source_ip=source_ip(request), **form.cleaned_data)
                messages.success(request, f"Request #{pk} approved; the cluster is being updated.")
            else:
                services.quota_request_reject(actor=request.user, request=quota_request,
                                              source_ip=source_ip(request), **form.cleaned_data)
                messages.success(request, f"Request #{pk} rejected.")
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            return redirect("quotas:approval-list")
    if quota_request.state != RequestState.PENDING:
        messages.error(request, f"Request #{pk} is already {quota_request.get_state_display().lower()}.")
        return redirect("quotas:approval-list")
    return _approval_page(request, bound_pk=pk, bound_form=form, status=400)


@platform_admin_required
def quota_set(request, slug, flavor_pk):
    """Set a team's quota of one flavor directly, pre-filled from the query (a right-sizing recommendation): the
    same capacity check and audit as any quota change."""
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    flavor = tenant_selectors.flavor_get(pk=flavor_pk)
    held = selectors.team_quotas(team=team).filter(flavor=flavor).first()
    initial = {name: getattr(held, name, 0) for name in services.REQUEST_FIELDS}
    if (typed := request.GET.get("guaranteed", "")).isdigit():
        initial["guaranteed"] = int(typed)
    form = QuotaSetForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        done = write_from_form(
            request, form, lambda: services.quota_set(actor=request.user, team=team, flavor=flavor,
                                                      source_ip=source_ip(request), **form.cleaned_data),
            message=lambda q: f"{team.slug} now holds {q.guaranteed} + {q.burst} {flavor.name}.",
            to="quotas:capacity")
        if done:
            return done
    amounts = form.cleaned_data if form.is_bound and form.is_valid() else initial
    effect = selectors.impact(flavor=flavor, team=team, guaranteed=amounts["guaranteed"], burst=amounts["burst"])
    return render(request, "quotas/quota_set.html", {"team": team, "flavor": flavor, "held": held, "form": form,
                                                      "i": effect}, status=400 if form.errors else 200)


@platform_admin_required
def capacity(request):
    overview = selectors.capacity_overview()
    sharing = []
    for cluster in tenant_selectors.active_clusters():
        rows = fair_share.fair_shares(cluster=cluster)
        # The backend says which kind of fair sharing its scheduler has (a tree of cohorts with weighted shares and
        # decayed usage, or proportion among sibling queues), so the page never names a scheduler.
        sharing.append((cluster, backend_for(cluster), rows, fair_share.decayed_usage_state(rows)))
    return render(request, "quotas/capacity.html", {"overview": overview, "sharing": sharing})


@platform_admin_required
@require_POST
def team_weight(request, slug):
    """A team's fair-share weight, set beside the share it gives (on the capacity page)."""
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    form = FairShareWeightForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"{team.name}: {' '.join(form.errors['weight'])}")
        return redirect("quotas:capacity")
    tenant_services.team_set_fair_share_weight(actor=request.user, team=team, weight=form.cleaned_data["weight"],
                                               source_ip=source_ip(request))
    messages.success(request, f"{team.name} now has fair-share weight {form.cleaned_data['weight']}.")
    return redirect("quotas:capacity")


def _typed_capacity(raw) -> int | None:
    return int(raw) if raw is not None and raw.strip().isdigit() else None


@platform_admin_required
@require_GET
def flavor_effect(request, pk):
    """The effect of the capacity being typed into a flavor's form (HTMX, as the admin types)."""
    flavor = tenant_selectors.flavor_get(pk=pk)
    effect = selectors.capacity_effect(flavor=flavor, capacity=_typed_capacity(request.GET.get("capacity")))
    return render(request, "quotas/_capacity_effect.html", {"effect": effect})


@platform_admin_required
def flavor_edit(request, pk=None):
    flavor = tenant_selectors.flavor_get(pk=pk) if pk else None
    effect = selectors.capacity_effect(flavor=flavor, capacity=_typed_capacity(request.POST.get("capacity"))) \
        if flavor else None
    form = GpuFlavorForm(request.POST or None, instance=flavor)
    if request.method == "POST" and form.is_valid():
        try:
            saved = tenant_services.gpu_flavor_save(actor=request.user, flavor=form.instance,
                                                    source_ip=source_ip(request))
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"Flavor {saved.name} saved.")
            return redirect("quotas:capacity")
    setup = cluster_setup(flavor) + backend_for(flavor.cluster).flavor_setup(flavor) if flavor else []
    return render(request, "quotas/flavor_form.html", {"form": form, "flavor": flavor, "effect": effect,
                                                       "isolation": sharing_isolation(), "setup": setup})


@platform_admin_required
def tier_list(request):
    form = PriorityTierForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        done = write_from_form(
            request, form, lambda: tenant_services.priority_tier_save(actor=request.user, tier=form.instance,
                                                                      source_ip=source_ip(request)),
            message=lambda tier: f"Priority tier {tier.name} saved.", to="quotas:tier-list")
        if done:
            return done
    return render(request, "quotas/tier_list.html", {"tiers": tenant_selectors.tier_list(), "form": form})


# --- reservations and the capacity calendar ------------------------------------------------------------------


def _calendar_beside(request, flavors, initial=None):
    """The capacity calendar of the flavor a request or booking form is about (the one posted, picked or pre-filled,
    else the first offered), so a team picks an amount and a window that fit."""
    raw = request.POST.get("flavor") or request.GET.get("flavor") or (initial or {}).get("flavor")
    flavor = flavors.filter(pk=int(raw)).first() if raw and str(raw).isdigit() else None
    flavor = flavor or flavors.order_by("cluster__name", "name").first()
    return selectors.capacity_calendar(user=request.user, flavor=flavor) if flavor else None


@login_required
def reservation_create(request, slug):
    """Book units of a flavor for a future window, beside the flavor's calendar so a window that fits is seen."""
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    flavors = selectors.requestable_flavors(team=team).order_by("cluster__name", "name")
    form = ReservationForm(request.POST or None, flavors=flavors,
                           initial={"flavor": request.GET.get("flavor")} if request.GET.get("flavor") else None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        done = write_from_form(
            request, form, lambda: reservations.reservation_create(actor=request.user, team=team,
                                                                   source_ip=source_ip(request), **data),
            message=lambda r: f"Reservation #{r.pk} sent to the platform team.", to="quotas:team-quota",
            slug=team.slug)
        if done:
            return done
    return render(request, "quotas/reservation_form.html",
                  {"team": team, "form": form, "calendar": _calendar_beside(request, flavors)},
                  status=400 if form.errors else 200)


@require_POST
@login_required
def reservation_cancel(request, pk):
    reservation = selectors.reservation_get(user=request.user, pk=pk)
    try:
        reservations.reservation_cancel(actor=request.user, reservation=reservation, source_ip=source_ip(request))
        messages.success(request, f"Reservation #{pk} cancelled.")
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("quotas:team-quota", slug=reservation.team.slug)


@platform_admin_required
def reservation_approvals(request):
    pending = selectors.reservation_list(user=request.user, state="pending").order_by("starts_at", "pk")
    items = [{"r": r, "calendar": selectors.capacity_calendar(user=request.user, flavor=r.flavor,
                                                               days=min(selectors.CALENDAR_DAYS, 7))}
             for r in pending[:50]]
    return render(request, "quotas/reservation_approvals.html", {"items": items})


@require_POST
@platform_admin_required
def reservation_decide(request, pk, decision):
    if decision not in ("approve", "reject"):
        raise Http404("Unknown decision")
    reservation = selectors.reservation_get(user=request.user, pk=pk)
    note = request.POST.get("note", "")
    try:
        if decision == "approve":
            reservations.reservation_approve(actor=request.user, reservation=reservation, note=note,
                                             source_ip=source_ip(request))
            messages.success(request, f"Reservation #{pk} booked.")
        else:
            reservations.reservation_reject(actor=request.user, reservation=reservation, note=note,
                                            source_ip=source_ip(request))
            messages.success(request, f"Reservation #{pk} rejected.")
    except ValidationError as exc:
        messages.error(request, f"Reservation #{pk}: {' '.join(exc.messages)}")
    return redirect("quotas:reservation-approvals")


@login_required
@require_GET
def capacity_calendar(request, flavor_pk):
    """A flavor's guaranteed units over the coming weeks against its capacity, free capacity per day."""
    flavor = tenant_selectors.flavor_get(pk=flavor_pk)
    calendar = selectors.capacity_calendar(user=request.user, flavor=flavor)
    others = tenant_selectors.flavor_list().order_by("cluster__name", "name")
    return render(request, "quotas/calendar.html", {"calendar": calendar, "flavors": others,
                                                    "is_platform_admin": tenant_selectors.is_platform_admin(
                                                        request.user)})
