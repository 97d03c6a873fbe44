from django.urls import path

from . import views

app_name = "quotas"

urlpatterns = [
    path("teams/<slug:slug>/quota/", views.team_quota, name="team-quota"),
    path("teams/<slug:slug>/quota/request/", views.request_create, name="request-create"),
    path("quota/requests/", views.request_list, name="request-list"),
    path("quota/requests/<int:pk>/withdraw/", views.request_withdraw, name="request-withdraw"),
    path("teams/<slug:slug>/reservations/new/", views.reservation_create, name="reservation-create"),
    path("quota/reservations/<int:pk>/cancel/", views.reservation_cancel, name="reservation-cancel"),
    path("quota/calendar/<int:flavor_pk>/", views.capacity_calendar, name="calendar"),
    path("console/reservations/", views.reservation_approvals, name="reservation-approvals"),
    path("console/reservations/<int:pk>/<str:decision>/", views.reservation_decide, name="reservation-decide"),
    path("console/approvals/", views.approval_list, name="approval-list"),
    path("console/approvals/<int:pk>/impact/", views.request_impact, name="request-impact"),
    path("console/approvals/<int:pk>/<str:decision>/", views.request_decide, name="request-decide"),
    path("console/quotas/<slug:slug>/<int:flavor_pk>/", views.quota_set, name="quota-set"),
    path("console/capacity/", views.capacity, name="capacity"),
    path("console/teams/<slug:slug>/weight/", views.team_weight, name="team-weight"),
    path("console/flavors/new/", views.flavor_edit, name="flavor-create"),
    path("console/flavors/<int:pk>/", views.flavor_edit, name="flavor-edit"),
    path("console/flavors/<int:pk>/effect/", views.flavor_effect, name="flavor-effect"),
    path("console/tiers/", views.tier_list, name="tier-list"),
]
