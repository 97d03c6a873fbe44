"""API views of usage and cost: a team's GPU-hours per day, its monthly statement and its budget, read through
the billing selectors (the same numbers as the usage pages), scoped like every team read."""

from datetime import UTC, date, datetime, time, timedelta

from django.core.exceptions import ValidationError
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.exceptions import ValidationError as InputError
from rest_framework.response import Response
from rest_framework.views import APIView

from backends import backend_for
from portal.limits import DAY_PATTERN, EARLIEST_YEAR, LATEST_YEAR, MONTH_PATTERN, year_in_range
from quotas import selectors as quota_selectors
from tenants import selectors as tenant_selectors

from . import evidence, fair_sharing, holds, selectors
from .forms import FairSharingWhatIfForm
from .serializers import (
    BudgetSerializer,
    EvidenceSerializer,
    FairSharingWhatIfSerializer,
    RecommendationSerializer,
    StatementSerializer,
    UsageSerializer,
)

MAX_USAGE_DAYS = 366


def _month(value: str | None) -> date:
    try:
        return selectors.month_or_current(value)
    except ValidationError as exc:
        raise InputError({"month": exc.messages}) from None


def _day(params, name: str, default: date) -> date:
    value = params.get(name)
    if value is None:
        return default
    try:
        day = date.fromisoformat(value)
    except ValueError:
        day = None
    if day is None or not year_in_range(day.year):
        raise InputError({name: [f"'{value}' is not a date: use YYYY-MM-DD from {EARLIEST_YEAR}-01-01 to "
                                 f"{LATEST_YEAR}-12-31."]})
    return day


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


class UsageView(APIView):
    @extend_schema(responses=UsageSerializer, summary="GPU-hours per day and flavor (this month by default)",
                   description=f"`end` must be after `start` and at most {MAX_USAGE_DAYS} days later (a 400 "
                               "naming `end` otherwise); a day that does not exist (2026-02-30) is a 400 too.",
                   parameters=[OpenApiParameter("start", {"type": "string", "pattern": DAY_PATTERN},
                                                description="First day (YYYY-MM-DD, years 2000-2999)"),
                               OpenApiParameter("end", {"type": "string", "pattern": DAY_PATTERN},
                                                description="Day after the last (YYYY-MM-DD, years 2000-2999)")])
    def get(self, request, slug):
        team = tenant_selectors.team_get(user=request.user, slug=slug)
        month = selectors.current_month()
        start = _day(request.query_params, "start", month)
        end = _day(request.query_params, "end", (month + timedelta(days=32)).replace(day=1))
        if not start < end <= start + timedelta(days=MAX_USAGE_DAYS):
            raise InputError({"end": [f"After start, and at most {MAX_USAGE_DAYS} days later."]})
        rows = selectors.team_daily_usage(team=team, start=_midnight(start), end=_midnight(end))
        days = [{"day": r["day"], "flavor": r["flavor"], "allocated_gpu_hours": r["allocated"],
                 "used_gpu_hours": r["used"] or 0} for r in rows]
        return Response(UsageSerializer({"team": team.slug, "start": start, "end": end, "days": days}).data)


class StatementView(APIView):
    @extend_schema(responses=StatementSerializer, summary="A team's statement for one month (YYYY-MM)",
                   parameters=[OpenApiParameter("month", {"type": "string", "pattern": MONTH_PATTERN},
                                                OpenApiParameter.PATH, description="YYYY-MM, years 2000-2999")])
    def get(self, request, slug, month):
        team = tenant_selectors.team_get(user=request.user, slug=slug)
        statement = selectors.team_statement(team=team, month=_month(month))
        return Response(selectors.statement_json(statement))


class BudgetView(APIView):
    @extend_schema(responses=BudgetSerializer,
                   summary="The team's budget, spend and forecast for a month; its holds and allowances now",
                   parameters=[OpenApiParameter("month", {"type": "string", "pattern": MONTH_PATTERN},
                                                description="YYYY-MM (years 2000-2999); this month by default")])
    def get(self, request, slug):
        team = tenant_selectors.team_get(user=request.user, slug=slug)
        month = _month(request.query_params.get("month"))
        statement = selectors.team_statement(team=team, month=month)
        status = selectors.budget_status(team=team, statement=statement)
        panel = holds.team_budget_panel(team=team)
        return Response(BudgetSerializer({
            "team": team.slug, "month": f"{month:%Y-%m}", "currency": statement.currency,
            "amount": status.budget.amount if status.budget else None, "spent": status.spent,
            "forecast": status.forecast, "percent": status.percent, "forecast_percent": status.forecast_percent,
            "mode": status.budget.mode if status.budget else None, "held": panel.state.held,
            "held_since": panel.hold.started_at if panel.hold else None, "holds": panel.state.holds,
            "allowances": panel.state.allowances,
        }).data)


class QuotaRequestEvidenceView(APIView):
    @extend_schema(responses=EvidenceSerializer, summary="The last 30 days of the request's team and flavor",
                   description="Hour by hour: guaranteed, held and borrowed units and the units waiting for quota; "
                               "in total: allocated and used GPU-hours, p50/p95 of the units held at once, the idle "
                               "share and its cost, and the GPU-hours its jobs waited by reason (quota, placement, "
                               "budget). For the request's team and platform admins.")
    def get(self, request, pk):
        quota_request = quota_selectors.request_get(user=request.user, pk=pk)
        (found,) = evidence.evidence_for([(quota_request.team, quota_request.flavor)])
        return Response(EvidenceSerializer(found).data)


class FairSharingWhatIfView(APIView):
    @extend_schema(responses=FairSharingWhatIfSerializer, summary="Replay recorded usage through admission fair "
                   "sharing with other weights or half-lives (platform admins)",
                   description="Kueue clusters only (a 404 otherwise). Query: `weeks` (1-8, default 4), `half_life` "
                               "(Go duration, default 168h), `baseline_half_life` (today's, default 0s), `sampling` "
                               "(default 5m) and `weight_<team>` (1-65535, default the team's weight); a bad value "
                               "is a 400 naming it. Applies nothing.",
                   parameters=[OpenApiParameter(name, str, description=name) for name in
                               ("weeks", "half_life", "baseline_half_life", "sampling")])
    def get(self, request, name):
        if not tenant_selectors.is_platform_admin(request.user):
            raise PermissionDenied("Only platform admins try fair-sharing settings.")
        cluster = tenant_selectors.cluster_get(name=name)
        if not backend_for(cluster).decays_usage:
            raise NotFound(f"{cluster.get_scheduler_display()} keeps no usage over time.")
        form = FairSharingWhatIfForm.from_query(request.query_params,
                                                teams=fair_sharing.cluster_teams(cluster=cluster))
        if not form.is_valid():
            raise InputError({field: list(errors) for field, errors in form.errors.items()})
        tried, baseline = form.settings()
        result = fair_sharing.what_if(cluster=cluster, weights=form.weights(), settings=tried, baseline=baseline,
                                      weeks=form.cleaned_data["weeks"], now=timezone.now())
        return Response(FairSharingWhatIfSerializer({"cluster": cluster.name, "start": result.start,
                                                     "end": result.end, "recorded_hours": result.recorded_hours,
                                                     "teams": result.teams}).data)


class RightsizingView(APIView):
    @extend_schema(responses=RecommendationSerializer(many=True),
                   summary="Recommended guaranteed quota per team and flavor (platform and team admins)",
                   description="p95 of the units held over the last 30 days, less the idle share, plus the units "
                               "its quota waits ask for; the largest changes first. Team admins get their teams' "
                               "rows; others a 403.")
    def get(self, request):
        if not evidence.can_see_rightsizing(user=request.user):
            raise PermissionDenied("Platform admins and team admins only.")
        return Response(RecommendationSerializer(evidence.rightsizing(user=request.user), many=True).data)
