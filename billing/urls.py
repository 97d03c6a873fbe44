from django.urls import path, register_converter

from . import views


class MonthConverter:
    regex = r"\d{4}-\d{2}"

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


register_converter(MonthConverter, "month")

app_name = "billing"

urlpatterns = [
    path("teams/<slug:slug>/usage/", views.team_usage, name="team-usage"),
    path("teams/<slug:slug>/usage/explore/", views.team_usage_explore, name="usage-explore"),
    path("teams/<slug:slug>/usage/budget/", views.budget_set, name="budget-set"),
    path("teams/<slug:slug>/usage/allowances/", views.allowance_set, name="allowance-set"),
    path("teams/<slug:slug>/usage/overrides/", views.override_grant, name="override-grant"),
    path("teams/<slug:slug>/usage/statements/<month:month>/", views.team_statement, name="team-statement"),
    path("teams/<slug:slug>/usage/statements/<month:month>.<str:fmt>", views.team_statement_export,
         name="team-statement-export"),
    path("quota/requests/<int:pk>/evidence/", views.request_evidence, name="request-evidence"),
    path("quota/rightsizing/", views.rightsizing, name="rightsizing"),
    path("console/usage/", views.console_usage, name="console-usage"),
    path("console/usage/statements/<month:month>.csv", views.console_statements_csv, name="console-statements-csv"),
    path("console/rates/", views.console_rates, name="console-rates"),
    path("console/clusters/<str:name>/utilisation-signal/", views.console_cluster_signal, name="cluster-signal"),
    path("console/clusters/<str:name>/fair-sharing/", views.fair_sharing_what_if, name="fair-sharing-what-if"),
    path("usage/jobs/<int:pk>/activity/", views.job_activity, name="job-activity"),
]
