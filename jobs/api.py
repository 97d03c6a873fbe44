"""API views of jobs: submit each kind, list with filters, read, cancel, resubmit, YAML, why-waiting and the
pods' log tail. Submission goes through the same service as the form, so the same feasibility checks apply."""

from django_filters.utils import translate_validation
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import yamltext
from portal.api import KeysetPagination, valid_input
from portal.http import source_ip
from portal.kube import KubeError
from tenants import selectors as tenant_selectors
from tenants.idempotency import IDEMPOTENCY_PARAMETER, idempotent

from . import selectors, services, sooner
from .choices import JobState
from .filters import JobFilter, UtcIsoDateTimeFilter
from .manifests import job_manifests
from .models import Job
from .serializers import (
    JobListSerializer,
    JobLogsSerializer,
    JobProgressReportSerializer,
    JobSerializer,
    JobSubmitSerializer,
    JobYamlSerializer,
    ProgressField,
    ProgressSerializer,
    SoonerRequestSerializer,
    SoonerSerializer,
    WhyWaitingSerializer,
    estimate_fields,
)


class ClusterUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "cluster_unavailable"
    default_detail = "The cluster could not be read; try again."


def _job_detail(user, pk: int) -> dict:
    return JobSerializer(selectors.job_get(user=user, pk=pk)).data


class JobListView(generics.ListAPIView):
    """Newest first; filter by team, state, kind, user, flavor, cluster and submission time."""

    queryset = Job.objects.none()  # names the model for the schema; selectors.job_page scopes every request
    serializer_class = JobListSerializer
    filterset_class = JobFilter  # validates the query and describes it in the schema; job_page applies it
    pagination_class = KeysetPagination

    def list(self, request, *args, **kwargs):
        filters = self._filters()
        rows = self.paginator.paginate_rows(
            request, lambda **keyset: selectors.job_page(user=request.user, filters=filters, **keyset),
            position_of=lambda row: (row["submitted_at"], row["id"]))
        return self.get_paginated_response(JobListSerializer(rows, many=True).data)

    def _filters(self) -> dict:
        # Building the filter form deep-copies every filter; a plain "my newest jobs" page needs none of it.
        if not set(self.request.query_params) - {"cursor", "page_size"}:
            return {}
        # A time filter present but empty is no date-time, as the schema says (the page's form leaves it out).
        empty = [name for name, f in JobFilter.base_filters.items()
                 if isinstance(f, UtcIsoDateTimeFilter) and self.request.query_params.get(name) == ""]
        if empty:
            raise ValidationError({name: ["Enter a valid date/time."] for name in empty})
        filterset = JobFilter(data=self.request.query_params, queryset=self.queryset)
        if not filterset.is_valid():
            raise translate_validation(filterset.errors)
        return filterset.values()

    @extend_schema(request=JobSubmitSerializer, responses={201: JobSerializer},
                   summary="Submit a job (team admins and members)", parameters=[IDEMPOTENCY_PARAMETER])
    @idempotent
    def post(self, request):
        data = valid_input(JobSubmitSerializer, request)
        team = _submit_team(request.user, data.pop("team", None))
        flavor = tenant_selectors.flavor_named(name=data.pop("flavor"), cluster=data.pop("cluster", None))
        priority = data.pop("priority", None)
        tier = None if priority is None else tenant_selectors.tier_named(name=priority)
        if data.pop("earliest_cluster"):
            flavor = sooner.earliest_flavor(team=team, flavor=flavor, kind=data["kind"], image=data["image"],
                                            workers=data["workers"], gpus_per_worker=data["gpus_per_worker"],
                                            tier=tier,
                                            max_runtime_minutes=data["max_runtime_minutes"])
        job = services.job_submit(actor=request.user, team=team, flavor=flavor, priority_tier=tier,
                                  source_ip=source_ip(request), **data)
        return Response(_job_detail(request.user, job.pk), status=status.HTTP_201_CREATED)


def _submit_team(user, slug: str | None):
    """The team named, or the only team the user may submit for."""
    if slug is not None:
        return tenant_selectors.team_get(user=user, slug=slug)
    teams = list(tenant_selectors.submit_team_list(user=user)[:2])
    if len(teams) == 1:
        return teams[0]
    raise ValidationError({"team": ["Name the team: you submit for several." if teams else
                                    "You submit for no team: ask a team admin to make you a member."]})


class JobDetailView(APIView):
    @extend_schema(responses=JobSerializer)
    def get(self, request, pk):
        return Response(_job_detail(request.user, pk))


class JobCancelView(APIView):
    @extend_schema(request=None, responses=JobSerializer,
                   summary="Cancel (the submitter or a team admin): the job's objects are deleted")
    def post(self, request, pk):
        job = selectors.job_get(user=request.user, pk=pk)
        services.job_cancel(actor=request.user, job=job, source_ip=source_ip(request))
        return Response(_job_detail(request.user, pk))


class JobProgressView(APIView):
    @extend_schema(request=JobProgressReportSerializer, responses=ProgressSerializer,
                   summary="Report the running job's progress (team admins and members; from its training code)")
    def post(self, request, pk):
        job = selectors.job_get(user=request.user, pk=pk)
        data = valid_input(JobProgressReportSerializer, request)
        job = services.job_progress_report(actor=request.user, job=job, done=data["done"], total=data["total"])
        return Response(ProgressField().to_representation(job))


class JobResubmitView(APIView):
    @extend_schema(request=None, responses={201: JobSerializer},
                   summary="Submit an ended or preempted job again, as a new job")
    def post(self, request, pk):
        job = selectors.job_get(user=request.user, pk=pk)
        new = services.job_resubmit(actor=request.user, job=job, source_ip=source_ip(request))
        return Response(_job_detail(request.user, new.pk), status=status.HTTP_201_CREATED)


class JobYamlView(APIView):
    @extend_schema(responses=JobYamlSerializer, summary="The objects the portal applies for the job")
    def get(self, request, pk):
        job = selectors.job_get(user=request.user, pk=pk)
        objects = selectors.job_desired(job=job) or job_manifests(selectors.job_spec(job))
        return Response({"yaml": yamltext.dump_all(objects)})


class JobWhyWaitingView(APIView):
    @extend_schema(responses=WhyWaitingSerializer, summary="Why the job is not running yet, in one sentence")
    def get(self, request, pk):
        job = selectors.job_get(user=request.user, pk=pk)
        ahead = list(selectors.jobs_ahead(job=job)[:20]) if job.state == JobState.QUEUED else []
        return Response(WhyWaitingSerializer({"state": job.state, "message": selectors.why_waiting(job=job),
                                              "ahead": ahead}).data)


class JobLogsView(APIView):
    @extend_schema(responses={200: JobLogsSerializer,
                              503: OpenApiResponse(description="The cluster could not be read.")},
                   summary="The job's pods and the last lines of their logs")
    def get(self, request, pk):
        job = selectors.job_get(user=request.user, pk=pk)
        try:
            pods = selectors.job_pods(job=job)
        except KubeError as exc:
            raise ClusterUnavailable(f"The cluster {job.cluster.name} could not be read: {exc}") from exc
        return Response(JobLogsSerializer({"pods": pods}).data)


class JobSoonerView(APIView):
    @extend_schema(responses=SoonerSerializer,
                   summary="What would start the waiting job sooner: its alternatives, each with its estimate")
    def get(self, request, pk):
        job = selectors.job_get(user=request.user, pk=pk)
        return Response(SoonerSerializer({"estimated_start": estimate_fields(job.estimate)["estimated_start"]
                                          if not job.terminal else None,
                                          "alternatives": sooner.job_alternatives(job=job)}).data)

    @extend_schema(request=SoonerRequestSerializer, responses={201: JobSerializer},
                   summary="Resubmit the waiting job with one alternative's change; the original is cancelled")
    def post(self, request, pk):
        job = selectors.job_get(user=request.user, pk=pk)
        data = valid_input(SoonerRequestSerializer, request)
        new = sooner.job_resubmit_changed(actor=request.user, job=job, change=data["change"],
                                          source_ip=source_ip(request))
        return Response(_job_detail(request.user, new.pk), status=status.HTTP_201_CREATED)
