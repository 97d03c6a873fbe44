"""Usage and money pages: a team's usage, budget and statements; the console's cost, utilisation and rates.

Thin views: teams come from the tenants selectors (another team's usage is a 404), numbers from billing selectors,
writes through services; charts are built from the selectors' rows.
"""

import io
import json
from datetime import timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from backends import backend_for
from jobs import selectors as job_selectors
from portal.http import platform_admin_required, source_ip, write_from_form
from quotas import selectors as quota_selectors
from tenants import selectors as tenant_selectors

from . import activity, budgets, capacity, charts, evidence, explore, fair_sharing, holds, selectors
from .choices import BudgetMode
from .forms import AllowanceForm, BudgetForm, FairSharingWhatIfForm, OverrideForm, RateCardForm, UsageRangeForm
from .metrics import MetricsError

EXPORT_FORMATS = {"csv": "text/csv; charset=utf-8", "json": "application/json"}


def _month(request, value: str | None = None):
    """The month asked for (path or ?month=), or this month; a malformed month is a 404 in a path, a message in a
    query string."""
    try:
        return selectors.month_or_current(value if value is not None else request.GET.get("month"))
    except ValidationError as exc:
        if value is not None:
            raise Http404(exc.messages[0]) from None
        messages.error(request, exc.messages[0])
        return selectors.current_month()


def _month_nav(month, *, first):
    """Neighbouring months that have something to show: none before `first`, none after this month."""
    previous = (month - timedelta(days=1)).replace(day=1)
    following = (month + timedelta(days=32)).replace(day=1)
    return {"previous": previous if previous >= first else None,
            "next": following if following <= selectors.current_month() else None}


def _team_usage_page(request, team, month, *, budget_form=None, allowance_form=None, override_form=None,
                     status=200):
    statement = selectors.team_statement(team=team, month=month)
    budget = selectors.budget_status(team=team, statement=statement)
    start, end = statement.start, statement.end
    usage_rows = selectors.team_daily_usage(team=team, start=start, end=end)
    cost_rows = selectors.team_daily_cost(team=team, month=month)
    can_budget = budgets.can_set_budget(user=request.user, team=team)
    if budget_form is None and can_budget:
        budget_form = BudgetForm(initial={"month": f"{month:%Y-%m}",
                                          "amount": budget.budget.amount if budget.budget else None,
                                          "mode": budget.budget.mode if budget.budget else BudgetMode.NOTIFY})
    platform = tenant_selectors.is_platform_admin(request.user)
    if platform:
        flavors = selectors.team_flavors(team=team)
        allowance_form = allowance_form or AllowanceForm(flavors=flavors)
        override_form = override_form or OverrideForm(flavors=flavors)
    return render(request, "billing/team_usage.html", {
        "team": team, "month": month, "nav": _month_nav(month, first=selectors.first_month(team=team)),
        "statement": statement, "budget": budget,
        "can_budget": can_budget, "budget_form": budget_form, "panel": holds.team_budget_panel(team=team),
        "allowance_form": allowance_form, "override_form": override_form,
        "idle": selectors.idle_report(user=request.user, team=team),
        "usage_chart": charts.figure_html(charts.usage_by_flavor_figure(usage_rows), div_id="usage-chart"),
        "cost_chart": charts.figure_html(charts.cost_vs_budget_figure(
            cost_rows, start=start, end=end, budget=budget.budget.amount if budget.budget else None,
            forecast=None if statement.is_final else budget.forecast, currency=statement.currency),
            div_id="cost-chart"),
    }, status=status)


@login_required
@require_GET
def team_usage(request, slug):
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    return _team_usage_page(request, team, _month(request))


@login_required
@require_GET
def team_usage_explore(request, slug):
    """A team's GPU-hours over a range of days, drilled down team → flavor → job → the job's hours; every state
    is its URL (range, flavor, job), so a view can be shared."""
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    form = UsageRangeForm(request.GET, today=timezone.now().date())
    context = {"team": team, "form": form}
    if not form.is_valid():
        return render(request, "billing/usage_explore.html", context, status=400)
    start, end = form.bounds()
    data = form.cleaned_data
    flavor = explore.team_flavor(team=team, name=data["flavor"]) if data["flavor"] else None
    job = explore.team_job(team=team, pk=data["job"]) if data["job"] and flavor else None
    if job is not None and job.flavor_id != flavor.pk:
        raise Http404("The job did not run on this flavor")
    if job is not None and data["by"] == "gpu":
        context.update(_job_gpus(job, start, end))
    elif job is not None:
        hours = explore.job_hours(job=job, start=start, end=end)
        context.update(level="job", job=job, hours=hours, chart=charts.figure_html(
            charts.job_activity_figure(hours), div_id="explore-chart") if hours else "")
    else:
        if flavor is not None:
            rows, rest = explore.by_job(team=team, flavor=flavor, start=start, end=end)
        else:
            rows, rest = explore.by_flavor(team=team, start=start, end=end), None
        days = explore.daily(team=team, start=start, end=end, flavor=flavor)
        context.update(level="flavor" if flavor else "team", rows=rows, rest=rest, chart=charts.figure_html(
            charts.usage_by_flavor_figure(days), div_id="explore-chart") if days else "")
    range_query = {"start": data["start"].isoformat(), "end": data["end"].isoformat()}
    today = timezone.now().date()
    context.update(flavor=flavor, range_query=urlencode(range_query),
                   flavor_query=urlencode({**range_query, "flavor": flavor.name}) if flavor else "",
                   job_query=urlencode({**range_query, "flavor": flavor.name, "job": job.pk}) if job else "",
                   presets=[(label, urlencode({"start": (today - timedelta(days=days - 1)).isoformat(),
                                               "end": today.isoformat(),
                                               **({"flavor": flavor.name} if flavor else {}),
                                               **({"job": job.pk} if job else {}),
                                               **({"by": "gpu"} if job and data["by"] else {})}))
                            for label, days in (("Last 24 hours", 1), ("Last 7 days", 7), ("Last 30 days", 30),
                                                ("Last 90 days", 90))])
    return render(request, "billing/usage_explore.html", context)


def _job_gpus(job, start, end) -> dict:
    """The explorer's GPU level: the job's GPUs one by one, read live; what the source could not answer is said on
    the page (the rest of it still works), and so is a range in which the job held no GPU."""
    context = {"level": "gpu", "job": job, "gpus": None, "gpu_error": "", "gpu_chart": ""}
    window = explore.job_window(job=job, start=start, end=end, now=timezone.now())
    if window is None:
        return context
    try:
        found = explore.job_gpus(job=job, start=window[0], end=window[1])
    except MetricsError as exc:
        context["gpu_error"] = str(exc)
        return context
    threshold = settings.IDLE_GPU_THRESHOLD
    context.update(gpus=found, signal_label=activity.signal_label(found.signal),
                   time_based=activity.time_based(found.signal),
                   gpu_rows=[(series, series.verdict(signal=found.signal, threshold=threshold))
                             for series in found.gpus])
    if found.gpus:
        context["gpu_chart"] = charts.figure_html(charts.job_gpus_figure(found), div_id="explore-chart")
    return context


@login_required
@require_POST
def budget_set(request, slug):
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    if not budgets.can_set_budget(user=request.user, team=team):
        raise PermissionDenied("Only the team's admins and platform admins set its budget.")
    form = BudgetForm(request.POST)
    if form.is_valid():
        month = form.cleaned_data["month"]
        done = write_from_form(
            request, form, lambda: budgets.budget_set(actor=request.user, team=team, month=month,
                                                       amount=form.cleaned_data["amount"],
                                                       mode=form.cleaned_data["mode"] or None,
                                                       source_ip=source_ip(request)),
            message=lambda budget: (f"Budget for {month:%B %Y}: {budget.amount} {budget.currency}, "
                                    f"{budget.get_mode_display().lower()}."),
            to=f"{reverse('billing:team-usage', args=[team.slug])}?month={month:%Y-%m}#main")
        if done:
            return done
    return _team_usage_page(request, team, selectors.current_month(), budget_form=form, status=400)


def _platform_team(request, slug):
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    if not tenant_selectors.is_platform_admin(request.user):
        raise PermissionDenied("Only platform admins set allowances and grant overrides.")
    return team


def _platform_write(request, slug, form_class, form_name, write, message):
    """A platform admin's form on the team's usage page (allowances, overrides): the write, or the page again with
    the form's errors."""
    team = _platform_team(request, slug)
    form = form_class(request.POST, flavors=selectors.team_flavors(team=team))
    if form.is_valid():
        done = write_from_form(request, form, lambda: write(team, form.cleaned_data), message=message,
                               to=f"{reverse('billing:team-usage', args=[team.slug])}#holds-heading")
        if done:
            return done
    return _team_usage_page(request, team, selectors.current_month(), status=400, **{form_name: form})


@login_required
@require_POST
def allowance_set(request, slug):
    return _platform_write(
        request, slug, AllowanceForm, "allowance_form",
        lambda team, data: budgets.allowance_set(actor=request.user, team=team, flavor=data["flavor"],
                                                 gpu_hours=data["gpu_hours"], window_days=data["window_days"],
                                                 source_ip=source_ip(request)),
        lambda a: f"Allowance: {a.gpu_hours} {a.flavor.name} GPU-hours over {a.window_days} days.")


@login_required
@require_POST
def override_grant(request, slug):
    return _platform_write(
        request, slug, OverrideForm, "override_form",
        lambda team, data: budgets.budget_override_grant(
            actor=request.user, team=team, flavor=data["flavor"], extra_gpu_hours=data["extra_gpu_hours"],
            extra_amount=data["extra_amount"], expires_at=data["expires_at"], reason=data["reason"],
            source_ip=source_ip(request)),
        lambda o: f"Override granted until {o.expires_at:%Y-%m-%d %H:%M} UTC.")


@login_required
@require_GET
def team_statement(request, slug, month):
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    month = _month(request, month)
    statement = selectors.team_statement(team=team, month=month)
    return render(request, "billing/statement.html", {
        "team": team, "statement": statement, "nav": _month_nav(month, first=selectors.first_month(team=team)),
        "backfill_days": settings.BILLING_BACKFILL_DAYS,
        "budget": selectors.budget_status(team=team, statement=statement),
    })


def _download(content: str, *, fmt: str, filename: str) -> HttpResponse:
    response = HttpResponse(content, content_type=EXPORT_FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    return response


@login_required
@require_GET
def team_statement_export(request, slug, month, fmt):
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    if fmt not in EXPORT_FORMATS:
        raise Http404("Statements download as .csv or .json")
    month = _month(request, month)
    statement = selectors.team_statement(team=team, month=month)
    if fmt == "json":
        content = json.dumps(selectors.statement_json(statement), indent=2)
    else:
        stream = io.StringIO()
        selectors.write_focus_csv([statement], stream)
        content = stream.getvalue()
    return _download(content, fmt=fmt, filename=f"statement-{team.slug}-{month:%Y-%m}")


# --- console -------------------------------------------------------------------------------------------------


@platform_admin_required
@require_GET
def console_usage(request):
    month = _month(request)
    statements = selectors.all_statements(user=request.user, month=month)
    rollups = selectors.rollups(statements)
    currency = statements[0].currency if statements else ""
    team_rows = [selectors.RollupRow(key=s.team.slug, teams=1, allocated_gpu_hours=s.allocated_gpu_hours,
                                     used_gpu_hours=s.used_gpu_hours, cost=s.total_cost, idle_cost=s.total_idle_cost)
                 for s in statements if s.lines]
    # The charts cover the month shown (up to now), like the tables beside them.
    start, month_end = selectors.month_bounds(month)
    end = min(month_end, selectors.floor_hour(timezone.now()) + selectors.HOUR)
    clusters = capacity.cluster_capacity(month=month)
    return render(request, "billing/console_usage.html", {
        "clusters": clusters, "unallocated_cost": sum((c.unallocated_cost for c in clusters), selectors.ZERO),
        "unpriced_gpu_hours": sum((s.unpriced_gpu_hours for s in statements), selectors.ZERO),
        "month": month, "nav": _month_nav(month, first=selectors.first_month()), "statements": statements,
        "rollups": rollups,
        "total": sum((s.total_cost for s in statements), selectors.ZERO), "currency": currency,
        "idle": selectors.idle_report(user=request.user),
        "team_chart": charts.figure_html(charts.cost_by_group_figure(
            team_rows, title="Cost by team", currency=currency), div_id="team-cost-chart"),
        "cost_center_chart": charts.figure_html(charts.cost_by_group_figure(
            rollups["cost_center"], title="Cost by cost centre", currency=currency), div_id="cost-center-chart"),
        "utilisation_chart": charts.figure_html(charts.cluster_utilisation_figure(
            selectors.cluster_daily_utilisation(start=start, end=end)), div_id="utilisation-chart"),
        "heatmap": charts.figure_html(charts.utilisation_heatmap(
            selectors.team_day_utilisation(user=request.user, start=start, end=end)), div_id="heatmap"),
    })


@platform_admin_required
@require_GET
def console_cluster_signal(request, name):
    """The utilisation signal of a cluster and, where it is time-based, how to turn SM activity on (a fragment of
    the cluster page)."""
    cluster = tenant_selectors.cluster_get(name=name)
    return render(request, "billing/_cluster_signal.html", {
        "cluster": cluster, "signal": selectors.cluster_signal(cluster=cluster),
        "config": activity.exporter_config()})


@platform_admin_required
@require_GET
def fair_sharing_what_if(request, name):
    """Recorded usage replayed through the cluster's admission fair sharing with other weights or another
    half-life, beside today's: each team's decayed usage, share and place in the queue order. Applies nothing."""
    cluster = tenant_selectors.cluster_get(name=name)
    if not backend_for(cluster).decays_usage:
        raise Http404(f"{cluster.get_scheduler_display()} keeps no usage over time: there is nothing to replay.")
    teams = fair_sharing.cluster_teams(cluster=cluster)
    form = FairSharingWhatIfForm.from_query(request.GET, teams=teams)
    result = chart = None
    if form.is_valid():
        settings_tried, baseline = form.settings()
        result = fair_sharing.what_if(cluster=cluster, weights=form.weights(), settings=settings_tried,
                                      baseline=baseline, weeks=form.cleaned_data["weeks"], now=timezone.now())
        chart = charts.figure_html(charts.fair_sharing_figure(
            series_now=result.now.series, series=result.proposed.series,
            names={slug: name for slug, name, _ in teams}), div_id="fair-sharing-chart")
    return render(request, "billing/fair_sharing_what_if.html",
                  {"cluster": cluster, "form": form, "result": result, "chart": chart},
                  status=400 if form.errors else 200)


@login_required
@require_GET
def job_activity(request, pk):
    """A job's activity per collected hour (a fragment of the job page): SM and tensor-pipe activity where
    exported, so "busy, but no tensor cores used" shows."""
    job = job_selectors.job_get(user=request.user, pk=pk)
    rows = selectors.job_activity(job=job)
    chart = charts.figure_html(charts.job_activity_figure(rows), div_id="activity-chart") if rows else ""
    first, last = explore.job_days(job=job, today=timezone.now().date(), max_days=UsageRangeForm.MAX_DAYS)
    per_gpu = urlencode({"start": first.isoformat(), "end": last.isoformat(), "flavor": job.flavor.name,
                         "job": job.pk, "by": "gpu"})
    return render(request, "billing/_job_activity.html", {
        "job": job, "rows": rows, "chart": chart, "per_gpu": per_gpu,
        "time_based": any(activity.time_based(r["signal"]) for r in rows)})


@platform_admin_required
@require_GET
def console_statements_csv(request, month):
    month = _month(request, month)
    stream = io.StringIO()
    selectors.write_focus_csv(selectors.all_statements(user=request.user, month=month), stream)
    return _download(stream.getvalue(), fmt="csv", filename=f"statements-{month:%Y-%m}")


@platform_admin_required
def console_rates(request):
    flavors = tenant_selectors.flavor_list().order_by("cluster__name", "name")
    form = RateCardForm(request.POST or None, flavors=flavors)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        done = write_from_form(
            request, form, lambda: budgets.rate_card_set(actor=request.user, flavor=data["flavor"],
                                                          price=data["price"], effective_from=data["effective_from"],
                                                          note=data["note"], source_ip=source_ip(request)),
            message=lambda card: f"{card.flavor.name}: {card.price_per_gpu_hour} {card.currency} per GPU-hour "
                                 f"from {card.effective_from:%Y-%m-%d %H:%M} UTC.",
            to="billing:console-rates")
        if done:
            return done
    now = timezone.now()
    in_force = {p.flavor_id: p for p in selectors.price_periods(start=selectors.floor_hour(now),
                                                                 end=selectors.floor_hour(now) + selectors.HOUR,
                                                                 flavors=list(flavors))}
    month = selectors.current_month(now)
    unpriced = capacity.unpriced_gpu_hours_by_flavor(month=month)
    return render(request, "billing/console_rates.html", {
        "form": form, "cards": selectors.rate_cards(), "month": month,
        "flavors": [{"flavor": f, "now": in_force.get(f.pk), "unpriced": unpriced.get(f.pk)} for f in flavors],
    }, status=400 if form.errors else 200)


# --- evidence for quota decisions ----------------------------------------------------------------------------


def evidence_chart(found: evidence.Evidence, *, div_id: str) -> str:
    return charts.figure_html(charts.evidence_figure(
        hours=found.hours, guaranteed=found.guaranteed, allocated=found.allocated, borrowed=found.borrowed,
        quota_waiting=found.quota_waiting, flavor=found.flavor.name), div_id=div_id)


@login_required
@require_GET
def request_evidence(request, pk):
    """What the team did with the flavor in the last 30 days, beside the request: for its approver and its team."""
    quota_request = quota_selectors.request_get(user=request.user, pk=pk)
    (found,) = evidence.evidence_for([(quota_request.team, quota_request.flavor)])
    return render(request, "billing/request_evidence.html", {
        "r": quota_request, "e": found, "recommendation": evidence.Recommendation(evidence=found),
        "is_platform_admin": tenant_selectors.is_platform_admin(request.user),
        "chart": evidence_chart(found, div_id="evidence-chart"),
    })


@login_required
@require_GET
def rightsizing(request):
    """Every team × flavor with the guaranteed quota its evidence supports; team admins see their teams' rows."""
    platform = tenant_selectors.is_platform_admin(request.user)
    if not platform and not evidence.can_see_rightsizing(user=request.user):
        raise PermissionDenied("Platform admins and team admins only.")
    return render(request, "billing/rightsizing.html", {"rows": evidence.rightsizing(user=request.user),
                                                        "is_platform_admin": platform,
                                                        "days": evidence.WINDOW_DAYS})
