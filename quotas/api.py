"""API views of quotas: a team's quotas, quota requests (create, withdraw) and the platform admins' decisions
with the capacity-impact preview. Requests are validated by the same form as the page, then by the service."""

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api import valid_input
from portal.http import source_ip
from tenants import selectors as tenant_selectors
from tenants.idempotency import IDEMPOTENCY_PARAMETER, idempotent

from . import reservations, selectors, services
from .choices import RequestState, ReservationState
from .forms import QuotaRequestForm
from .models import MAX_UNITS, Quota, QuotaRequest, Reservation
from .serializers import (
    ApproveInputSerializer,
    BookInputSerializer,
    CalendarSerializer,
    ImpactSerializer,
    QuotaRequestInputSerializer,
    QuotaRequestSerializer,
    QuotaSerializer,
    RejectInputSerializer,
    ReservationInputSerializer,
    ReservationSerializer,
)


class TeamQuotaListView(generics.ListAPIView):
    queryset = Quota.objects.none()  # names the model for the schema; get_queryset scopes every request
    serializer_class = QuotaSerializer
    ordering = "id"

    def get_queryset(self):
        team = tenant_selectors.team_get(user=self.request.user, slug=self.kwargs["slug"])
        self.held = {h.quota.pk: h for h in selectors.team_held_quotas(team=team)}
        return selectors.team_quotas(team=team).select_related("team")

    def get_serializer(self, *args, **kwargs):
        for quota in (args[0] if args else []):
            held = self.held.get(quota.pk)
            quota.in_use_units = held.in_use if held else 0
            quota.not_applied = held.not_applied if held else ""
        return super().get_serializer(*args, **kwargs)


class QuotaRequestListView(generics.ListAPIView):
    queryset = QuotaRequest.objects.none()
    serializer_class = QuotaRequestSerializer
    ordering = "-id"

    @extend_schema(parameters=[
        OpenApiParameter("state", str, enum=RequestState.values, description="Only requests in this state"),
        OpenApiParameter("team", str, description="Only this team's requests (its slug)"),
    ])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        state = self.request.query_params.get("state", "")
        if state and state not in RequestState.values:
            raise ValidationError({"state": [f"One of {', '.join(RequestState.values)}."]})
        return selectors.request_list(user=self.request.user, state=state or None,
                                      team_slug=self.request.query_params.get("team"))

    @extend_schema(request=QuotaRequestInputSerializer, responses={201: QuotaRequestSerializer},
                   summary="Ask for quota (team admins and members)", parameters=[IDEMPOTENCY_PARAMETER])
    @idempotent
    def post(self, request):
        data = valid_input(QuotaRequestInputSerializer, request)
        team = tenant_selectors.team_get(user=request.user, slug=data["team"])
        if "flavor" in data:
            flavor_id = tenant_selectors.flavor_named(name=data["flavor"], cluster=data.get("cluster")).pk
            flavor_field = "flavor"
        else:
            flavor_id, flavor_field = data["flavor_id"], "flavor_id"
        form = QuotaRequestForm(data={
            "flavor": flavor_id, "guaranteed": data["guaranteed_units"], "burst": data["burst_units"],
            "cpu_cores": data.get("cpu_cores"), "memory_gib": data.get("memory_gib"),
            "storage_gib": data["storage_gib"], "ends_at": data.get("ends_at"),
            "justification": data["justification"],
        }, flavors=selectors.requestable_flavors(team=team))
        if not form.is_valid():
            renamed = {"flavor": flavor_field, "guaranteed": "guaranteed_units", "burst": "burst_units"}
            raise ValidationError({renamed.get(k, k): v for k, v in form.errors.items()})
        created = services.quota_request_create(actor=request.user, team=team, source_ip=source_ip(request),
                                                **form.cleaned_data)
        created = selectors.request_get(user=request.user, pk=created.pk)
        return Response(QuotaRequestSerializer(created).data, status=status.HTTP_201_CREATED)


class QuotaRequestDetailView(APIView):
    @extend_schema(responses=QuotaRequestSerializer)
    def get(self, request, pk):
        return Response(QuotaRequestSerializer(selectors.request_get(user=request.user, pk=pk)).data)


# POST on one request, scoped to the user (another team's is a 404): act through the service, then answer with the
# request as it now is. A comment, not a docstring: drf-spectacular would publish a docstring as each endpoint's
# description.
class _ActionView(APIView):
    """Subclasses name the scoped selector (`get_row`), the output serializer and the service call (`act`)."""

    get_row = staticmethod(selectors.request_get)
    output = QuotaRequestSerializer

    def act(self, request, row) -> None:
        raise NotImplementedError

    def post(self, request, pk):
        self.act(request, self.get_row(user=request.user, pk=pk))
        return Response(self.output(self.get_row(user=request.user, pk=pk)).data)


class _RequestActionView(_ActionView):
    pass


@extend_schema_view(post=extend_schema(request=None, responses=QuotaRequestSerializer,
                                       summary="Withdraw a pending request (its requester or a team admin)"))
class QuotaRequestWithdrawView(_RequestActionView):
    def act(self, request, quota_request):
        services.quota_request_withdraw(actor=request.user, request=quota_request, source_ip=source_ip(request))


class QuotaRequestImpactView(APIView):
    @extend_schema(responses=ImpactSerializer, summary="What approving would change for the flavor (platform admins)",
                   parameters=[OpenApiParameter("guaranteed_units", int, description="Preview another amount"),
                               OpenApiParameter("burst_units", int)])
    def get(self, request, pk):
        quota_request = selectors.request_get(user=request.user, pk=pk)
        if not tenant_selectors.is_platform_admin(request.user):
            raise PermissionDenied("Only platform admins see the capacity impact of a request.")
        guaranteed = _amount(request.query_params, "guaranteed_units", quota_request.guaranteed)
        burst = _amount(request.query_params, "burst_units", quota_request.burst)
        effect = selectors.impact(flavor=quota_request.flavor, team=quota_request.team, guaranteed=guaranteed,
                                  burst=burst)
        return Response(ImpactSerializer(effect).data)


def _amount(params, name: str, default: int) -> int:
    value = params.get(name)
    if value is None:
        return default
    if not value.isdigit() or int(value) > MAX_UNITS:
        raise ValidationError({name: [f"A whole number between 0 and {MAX_UNITS}."]})
    return int(value)


@extend_schema_view(post=extend_schema(request=ApproveInputSerializer, responses=QuotaRequestSerializer,
                                       summary="Approve, optionally with adjusted amounts (platform admins)"))
class QuotaRequestApproveView(_RequestActionView):
    def act(self, request, quota_request):
        data = valid_input(ApproveInputSerializer, request)
        services.quota_request_approve(actor=request.user, request=quota_request, note=data["note"],
                                       guaranteed=data.get("guaranteed_units"), burst=data.get("burst_units"),
                                       source_ip=source_ip(request))


@extend_schema_view(post=extend_schema(request=RejectInputSerializer, responses=QuotaRequestSerializer,
                                       summary="Reject with a note the team sees (platform admins)"))
class QuotaRequestRejectView(_RequestActionView):
    def act(self, request, quota_request):
        data = valid_input(RejectInputSerializer, request)
        services.quota_request_reject(actor=request.user, request=quota_request, note=data["note"],
                                      source_ip=source_ip(request))


class ReservationListView(generics.ListAPIView):
    queryset = Reservation.objects.none()
    serializer_class = ReservationSerializer
    ordering = "-id"

    @extend_schema(parameters=[
        OpenApiParameter("state", str, enum=ReservationState.values, description="Only reservations in this state"),
        OpenApiParameter("team", str, description="Only this team's reservations (its slug)"),
    ])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        state = self.request.query_params.get("state", "")
        if state and state not in ReservationState.values:
            raise ValidationError({"state": [f"One of {', '.join(ReservationState.values)}."]})
        return selectors.reservation_list(user=self.request.user, state=state or None,
                                          team_slug=self.request.query_params.get("team"))

    @extend_schema(request=ReservationInputSerializer, responses={201: ReservationSerializer},
                   summary="Book units of a flavor for a future window (team admins and members)",
                   description="Decided by a platform admin like a quota request; refused on approval if at any "
                               "instant of the window the flavor's guarantees would exceed what capacity allows.")
    def post(self, request):
        data = valid_input(ReservationInputSerializer, request)
        team = tenant_selectors.team_get(user=request.user, slug=data["team"])
        flavor = tenant_selectors.flavor_named(name=data["flavor"], cluster=data.get("cluster"))
        if data["ends_at"] <= data["starts_at"]:
            raise ValidationError({"ends_at": ["The window must end after it starts."]})
        created = reservations.reservation_create(actor=request.user, team=team, flavor=flavor, units=data["units"],
                                                  starts_at=data["starts_at"], ends_at=data["ends_at"],
                                                  justification=data["justification"], source_ip=source_ip(request))
        return Response(ReservationSerializer(selectors.reservation_get(user=request.user, pk=created.pk)).data,
                        status=status.HTTP_201_CREATED)


class ReservationDetailView(APIView):
    @extend_schema(responses=ReservationSerializer)
    def get(self, request, pk):
        return Response(ReservationSerializer(selectors.reservation_get(user=request.user, pk=pk)).data)


# POST on one reservation, scoped to the user: act through the service, answer with the reservation as it now is.
class _ReservationActionView(_ActionView):
    get_row = staticmethod(selectors.reservation_get)
    output = ReservationSerializer


@extend_schema_view(post=extend_schema(request=None, responses=ReservationSerializer,
                                       summary="Cancel a pending or booked reservation before it starts"))
class ReservationCancelView(_ReservationActionView):
    def act(self, request, reservation):
        reservations.reservation_cancel(actor=request.user, reservation=reservation, source_ip=source_ip(request))


@extend_schema_view(post=extend_schema(request=BookInputSerializer, responses=ReservationSerializer,
                                       summary="Book it, if it fits at every instant (platform admins)"))
class ReservationApproveView(_ReservationActionView):
    def act(self, request, reservation):
        data = valid_input(BookInputSerializer, request)
        reservations.reservation_approve(actor=request.user, reservation=reservation, note=data["note"],
                                         source_ip=source_ip(request))


@extend_schema_view(post=extend_schema(request=RejectInputSerializer, responses=ReservationSerializer,
                                       summary="Reject with a note the team sees (platform admins)"))
class ReservationRejectView(_ReservationActionView):
    def act(self, request, reservation):
        data = valid_input(RejectInputSerializer, request)
        reservations.reservation_reject(actor=request.user, reservation=reservation, note=data["note"],
                                        source_ip=source_ip(request))


class CalendarView(APIView):
    @extend_schema(responses=CalendarSerializer, summary="Guaranteed units per day of a flavor, and what is free",
                   parameters=[OpenApiParameter("flavor", {"type": "string", "minLength": 1, "maxLength": 63},
                                                required=True, description="The flavor's name"),
                               OpenApiParameter("cluster", {"type": "string", "maxLength": 63},
                                                description="When several clusters have it"),
                               OpenApiParameter("days", {"type": "integer", "minimum": 1, "maximum": 366},
                                                description="How many days from today (default 56)")])
    def get(self, request):
        name = request.query_params.get("flavor")
        if not name:
            raise ValidationError({"flavor": ["Name the flavor."]})
        flavor = tenant_selectors.flavor_named(name=name, cluster=request.query_params.get("cluster"))
        days = request.query_params.get("days", str(selectors.CALENDAR_DAYS))
        if not days.isdigit() or not 1 <= int(days) <= 366:
            raise ValidationError({"days": ["A whole number from 1 to 366."]})
        return Response(CalendarSerializer(selectors.capacity_calendar(user=request.user, flavor=flavor,
                                                                       days=int(days))).data)
