"""Every endpoint of /api/v1, plus the OpenAPI schema and its interactive docs (assets served by the portal)."""

from csp.constants import SELF, UNSAFE_INLINE
from csp.decorators import csp_update
from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from billing import api as billing_api
from jobs import api as jobs_api
from portal.api import api_not_found
from quotas import api as quotas_api
from tenants import api as tenants_api
from workspaces import api as workspaces_api

app_name = "api"
_docs_styles = csp_update({"style-src": [UNSAFE_INLINE]})

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI's start-up script is served from docs/?script= rather than inline; both libraries insert <style>
    # elements for their widgets, the one relaxation of the portal's Content-Security-Policy.
    path("docs/", _docs_styles(SpectacularSwaggerSplitView.as_view(url_name="api:schema")), name="docs"),
    # Redoc's search index runs in a worker it builds from its own bundle (a blob: URL).
    path("redoc/", csp_update({"style-src": [UNSAFE_INLINE], "worker-src": [SELF, "blob:"]})(
        SpectacularRedocView.as_view(url_name="api:schema")), name="redoc"),
    path("v1/me/", tenants_api.MeView.as_view(), name="me"),
    path("v1/teams/", tenants_api.TeamListView.as_view(), name="team-list"),
    path("v1/teams/<slug:slug>/", tenants_api.TeamDetailView.as_view(), name="team-detail"),
    path("v1/teams/<slug:slug>/members/", tenants_api.MemberListView.as_view(), name="member-list"),
    path("v1/teams/<slug:slug>/members/<str:username>/", tenants_api.MemberDetailView.as_view(), name="member-detail"),
    path("v1/teams/<slug:slug>/quotas/", quotas_api.TeamQuotaListView.as_view(), name="team-quota-list"),
    path("v1/teams/<slug:slug>/usage/", billing_api.UsageView.as_view(), name="team-usage"),
    path("v1/teams/<slug:slug>/statements/<str:month>/", billing_api.StatementView.as_view(), name="team-statement"),
    path("v1/teams/<slug:slug>/budget/", billing_api.BudgetView.as_view(), name="team-budget"),
    path("v1/clusters/", tenants_api.ClusterListView.as_view(), name="cluster-list"),
    path("v1/clusters/<str:name>/", tenants_api.ClusterDetailView.as_view(), name="cluster-detail"),
    path("v1/clusters/<str:name>/fair-sharing/what-if/", billing_api.FairSharingWhatIfView.as_view(),
         name="fair-sharing-what-if"),
    path("v1/flavors/", tenants_api.FlavorListView.as_view(), name="flavor-list"),
    path("v1/quota-requests/", quotas_api.QuotaRequestListView.as_view(), name="quota-request-list"),
    path("v1/quota-requests/<int:pk>/", quotas_api.QuotaRequestDetailView.as_view(), name="quota-request-detail"),
    path("v1/quota-requests/<int:pk>/withdraw/", quotas_api.QuotaRequestWithdrawView.as_view(),
         name="quota-request-withdraw"),
    path("v1/quota-requests/<int:pk>/impact/", quotas_api.QuotaRequestImpactView.as_view(),
         name="quota-request-impact"),
    path("v1/quota-requests/<int:pk>/approve/", quotas_api.QuotaRequestApproveView.as_view(),
         name="quota-request-approve"),
    path("v1/quota-requests/<int:pk>/reject/", quotas_api.QuotaRequestRejectView.as_view(),
         name="quota-request-reject"),
    path("v1/quota-requests/<int:pk>/evidence/", billing_api.QuotaRequestEvidenceView.as_view(),
         name="quota-request-evidence"),
    path("v1/reservations/", quotas_api.ReservationListView.as_view(), name="reservation-list"),
    path("v1/reservations/<int:pk>/", quotas_api.ReservationDetailView.as_view(), name="reservation-detail"),
    path("v1/reservations/<int:pk>/cancel/", quotas_api.ReservationCancelView.as_view(), name="reservation-cancel"),
    path("v1/reservations/<int:pk>/approve/", quotas_api.ReservationApproveView.as_view(),
         name="reservation-approve"),
    path("v1/reservations/<int:pk>/reject/", quotas_api.ReservationRejectView.as_view(), name="reservation-reject"),
    path("v1/calendar/", quotas_api.CalendarView.as_view(), name="calendar"),
    path("v1/rightsizing/", billing_api.RightsizingView.as_view(), name="rightsizing"),
    path("v1/jobs/", jobs_api.JobListView.as_view(), name="job-list"),
    path("v1/jobs/<int:pk>/", jobs_api.JobDetailView.as_view(), name="job-detail"),
    path("v1/jobs/<int:pk>/cancel/", jobs_api.JobCancelView.as_view(), name="job-cancel"),
    path("v1/jobs/<int:pk>/progress/", jobs_api.JobProgressView.as_view(), name="job-progress"),
    path("v1/jobs/<int:pk>/resubmit/", jobs_api.JobResubmitView.as_view(), name="job-resubmit"),
    path("v1/jobs/<int:pk>/yaml/", jobs_api.JobYamlView.as_view(), name="job-yaml"),
    path("v1/jobs/<int:pk>/why-waiting/", jobs_api.JobWhyWaitingView.as_view(), name="job-why-waiting"),
    path("v1/jobs/<int:pk>/logs/", jobs_api.JobLogsView.as_view(), name="job-logs"),
    path("v1/jobs/<int:pk>/sooner/", jobs_api.JobSoonerView.as_view(), name="job-sooner"),
    path("v1/workspaces/", workspaces_api.WorkspaceListView.as_view(), name="workspace-list"),
    path("v1/workspaces/images/", workspaces_api.WorkspaceImagesView.as_view(), name="workspace-images"),
    path("v1/workspaces/<int:pk>/", workspaces_api.WorkspaceDetailView.as_view(), name="workspace-detail"),
    path("v1/workspaces/<int:pk>/suspend/", workspaces_api.WorkspaceSuspendView.as_view(), name="workspace-suspend"),
    path("v1/workspaces/<int:pk>/resume/", workspaces_api.WorkspaceResumeView.as_view(), name="workspace-resume"),
    path("v1/workspaces/<int:pk>/keep/", workspaces_api.WorkspaceKeepView.as_view(), name="workspace-keep"),
    re_path(r"^", api_not_found, name="not-found"),  # last: whatever no pattern above matched (any character)
]
