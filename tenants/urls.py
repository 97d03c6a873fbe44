from django.urls import path

from . import console_views, views, webhook_views

app_name = "tenants"

# Kubernetes objects are addressed by API group and version as two path parts ("core" for v1), kind and name.
OBJECT = "<str:group>/<str:version>/<str:kind>/<str:name>/"
CLUSTER_OBJECT = "<str:group>/<str:version>/<str:kind>/<str:object_name>/"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("teams/<slug:slug>/", views.team_detail, name="team-detail"),
    path("teams/<slug:slug>/webhook/", webhook_views.team_webhook, name="team-webhook"),
    path("teams/<slug:slug>/members/add/", views.membership_add, name="membership-add"),
    path("teams/<slug:slug>/members/role/", views.membership_update, name="membership-update"),
    path("teams/<slug:slug>/members/remove/", views.membership_remove, name="membership-remove"),
    path("teams/<slug:slug>/clusters/<str:cluster_name>/retry/", views.namespace_retry, name="namespace-retry"),
    path("teams/<slug:slug>/clusters/<str:cluster_name>/objects/" + OBJECT, views.object_detail,
         name="object-detail"),
    path("teams/<slug:slug>/clusters/<str:cluster_name>/objects/" + OBJECT + "live/", views.object_live,
         name="object-live"),
    path("console/clusters/", console_views.console_cluster_list, name="cluster-list"),
    path("console/clusters/new/", console_views.console_cluster_create, name="cluster-create"),
    path("console/clusters/<str:name>/", console_views.console_cluster_detail, name="cluster-detail"),
    path("console/clusters/<str:name>/retry/", console_views.console_cluster_retry, name="cluster-retry"),
    path("console/clusters/<str:name>/hypernodes/", console_views.console_cluster_hypernodes,
         name="cluster-hypernodes"),
    path("console/clusters/<str:name>/objects/" + CLUSTER_OBJECT, console_views.console_cluster_object_detail,
         name="cluster-object-detail"),
    path("console/clusters/<str:name>/objects/" + CLUSTER_OBJECT + "live/", console_views.console_cluster_object_live,
         name="cluster-object-live"),
    path("console/teams/", console_views.console_team_list, name="team-list"),
    path("console/teams/<slug:slug>/state/", console_views.console_team_set_state, name="team-set-state"),
    path("console/teams/<slug:slug>/delete-namespaces/", console_views.console_team_delete_namespaces,
         name="team-delete-namespaces"),
    path("console/audit/", console_views.console_audit_list, name="audit-list"),
    path("tokens/", views.token_list, name="token-list"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token-revoke"),
]
