from django.urls import path

from . import views

app_name = "workspaces"

urlpatterns = [
    path("workspaces/", views.workspace_list, name="workspace-list"),
    path("workspaces/<int:pk>/", views.workspace_detail, name="workspace-detail"),
    path("workspaces/<int:pk>/<str:action>/", views.workspace_action, name="workspace-action"),
    path("teams/<slug:slug>/workspaces/new/", views.workspace_create, name="workspace-create"),
]
