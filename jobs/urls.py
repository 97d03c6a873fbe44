from django.urls import path

from . import views

app_name = "jobs"

urlpatterns = [
    path("jobs/", views.job_list, name="job-list"),
    path("queue/<str:cluster_name>/", views.queue, name="queue"),
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path("jobs/<int:pk>/pods/", views.job_pods, name="job-pods"),
    path("jobs/<int:pk>/logs.txt", views.job_logs_download, name="job-logs-download"),
    path("jobs/<int:pk>/sooner/", views.job_sooner, name="job-sooner"),
    path("jobs/<int:pk>/<str:action>/", views.job_action, name="job-action"),
    path("teams/<slug:slug>/jobs/new/<str:kind>/", views.job_submit, name="job-submit"),
    path("teams/<slug:slug>/job-templates/<int:pk>/delete/", views.template_delete, name="template-delete"),
]
