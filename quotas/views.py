"""Quota pages: a team's quotas (with units in use) and requests, the request form, the platform admins' approval
queue, capacity overview, flavors and priority tiers. Reads through selectors, writes through services."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal.http import platform_admin_required, source_ip, write_from_form
from tenants import selectors as tenant_selectors
from tenants import services as tenant_services
from tenants.choices import Role

from . import selectors, services
from .forms import ApproveForm, GpuFlavorForm, PriorityTierForm, QuotaRequestForm, RejectForm


@login_required
def team_quota(request, slug):
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    role = tenant_selectors.team_role(user=request.user, team=team)
    rows = selectors.team_held_quotas(team=team)
    return render(request, "quotas/team_quota.html", {
        "team": team,
        "rows": rows,
        "requests": selectors.team_requests(team=team)[:50],
        "can_request": role in (Role.ADMIN, Role.MEMBER),
        "is_team_admin": role == Role.ADMIN,
    })


@login_required
def request_create(request, slug):
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    flavors = selectors.requestable_flavors(team=team)
    initial = {}
    renew = request.GET.get("renew")
    if renew and renew.isdigit():
        previous = selectors.team_request(team=team, pk=int(renew))
        if previous:
            initial = {"flavor": previous.flavor_id, "guaranteed": previous.guaranteed, "burst": previous.burst,
                       "cpu_cores": previous.cpu_cores, "memory_gib": previous.memory_gib,
                       "justification": f"Renewal of #{previous.pk}: {previous.justification}"}
    form = QuotaRequestForm(request.POST or None, flavors=flavors, initial=initial)
    if request.method == "POST" and form.is_valid():
        done = write_from_form(
            request, form, lambda: services.quota_request_create(actor=request.user, team=team,
                                                                 source_ip=source_ip(request), **form.cleaned_data),
            message=lambda created: f"Request #{created.pk} sent to the platform team.", to="quotas:team-quota",
            slug=team.slug)
        if done:
            return done
    return render(request, "quotas/request_form.html", {"team": team, "form": form}, status=200)


@require_POST
@login_required
def request_withdraw(request, pk):
    quota_request = selectors.request_get(user=request.user, pk=pk)
    try:
        services.quota_request_withdraw(actor=request.user, request=quota_request, source_ip=source_ip(request))
        messages.success(request, f"Request #{pk} withdrawn.")
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("quotas:team-quota", slug=quota_request.team.slug)


@login_required
def request_list(request):
    return render(request, "quotas/request_list.html",
                  {"requests": selectors.request_list(user=request.user, requested_by=request.user)[:200]})


@platform_admin_required
def approval_list(request):
    pending = selectors.pending_with_impact(user=request.user)
    items = [{"request": r, "impact": i,
              "approve": ApproveForm(initial={"guaranteed": r.guaranteed, "burst": r.burst}, prefix=f"a{r.pk}"),
              "reject": RejectForm(prefix=f"r{r.pk}")} for r, i in pending]
    decided = selectors.recently_decided(user=request.user)
    return render(request, "quotas/approval_list.html", {"items": items, "decided": decided})


@require_POST
@platform_admin_required
def request_decide(request, pk, decision):
    if decision not in ("approve", "reject"):
        raise Http404("Unknown decision")
    quota_request = selectors.request_get(user=request.user, pk=pk)
    form_class, prefix = (ApproveForm, f"a{pk}") if decision == "approve" else (RejectForm, f"r{pk}")
    form = form_class(request.POST, prefix=prefix)
    if not form.is_valid():
        messages.error(request, f"#{pk}: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return redirect("quotas:approval-list")
    try:
        if decision == "approve":
            services.quota_request_approve(actor=request.user, request=quota_request, source_ip=source_ip(request),
                                           **form.cleaned_data)
            messages.success(request, f"Request #{pk} approved; the cluster is being updated.")
        else:
            services.quota_request_reject(actor=request.user, request=quota_request, source_ip=source_ip(request),
                                          **form.cleaned_data)
            messages.success(request, f"Request #{pk} rejected.")
    except ValidationError as exc:
        messages.error(request, f"#{pk}: " + " ".join(exc.messages))
    return redirect("quotas:approval-list")


@platform_admin_required
def capacity(request):
    overview = selectors.capacity_overview()
    return render(request, "quotas/capacity.html", {"overview": overview})


@platform_admin_required
def flavor_edit(request, pk=None):
    flavor = tenant_selectors.flavor_get(pk=pk) if pk else None
    form = GpuFlavorForm(request.POST or None, instance=flavor)
    if request.method == "POST" and form.is_valid():
        done = write_from_form(
            request, form, lambda: tenant_services.gpu_flavor_save(actor=request.user, flavor=form.instance,
                                                                   source_ip=source_ip(request)),
            message=lambda saved: f"Flavor {saved.name} saved.", to="quotas:capacity")
        if done:
            return done
    return render(request, "quotas/flavor_form.html", {"form": form, "flavor": flavor})


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
