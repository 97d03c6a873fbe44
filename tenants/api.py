"""API views of tenancy: me, teams and their members, clusters and flavors. Thin: selectors read (scoped to the
user, so another team is a 404), services write (and refuse a role that may not act with a 403)."""

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api import valid_input
from portal.http import source_ip

from . import selectors, services
from .models import Membership, Team
from .serializers import (
    ClusterSerializer,
    FlavorSerializer,
    MemberInputSerializer,
    MemberRoleInputSerializer,
    MemberSerializer,
    MeSerializer,
    TeamSerializer,
)


class MeView(APIView):
    @extend_schema(responses=MeSerializer, summary="Who the caller is, and their teams with roles")
    def get(self, request):
        user = request.user
        memberships = {m.team_id: m.role for m in user.memberships.all()}
        admin = selectors.is_platform_admin(user)
        teams = [{"slug": t.slug, "name": t.name, "role": "admin" if admin else memberships[t.pk]}
                 for t in selectors.team_list(user=user)]
        return Response(MeSerializer({"username": user.username, "email": user.email, "is_platform_admin": admin,
                                      "teams": teams}).data)


class TeamListView(generics.ListAPIView):
    queryset = Team.objects.none()  # names the model for the schema; get_queryset scopes every request
    serializer_class = TeamSerializer
    ordering = "slug"

    def get_queryset(self):
        return selectors.team_list(user=self.request.user).select_related("parent")


class TeamDetailView(APIView):
    @extend_schema(responses=TeamSerializer)
    def get(self, request, slug):
        return Response(TeamSerializer(selectors.team_get(user=request.user, slug=slug)).data)


class MemberListView(generics.ListAPIView):
    queryset = Membership.objects.none()
    serializer_class = MemberSerializer
    ordering = "id"

    def get_queryset(self):
        team = selectors.team_get(user=self.request.user, slug=self.kwargs["slug"])
        return selectors.team_memberships(team=team)

    @extend_schema(request=MemberInputSerializer, responses={201: MemberSerializer},
                   summary="Add a member, or change a member's role (team admins)")
    def post(self, request, slug):
        team = selectors.team_get(user=request.user, slug=slug)
        data = valid_input(MemberInputSerializer, request)
        user = selectors.active_user_named(data["username"])
        if user is None:
            raise ValidationError({"username": [f"There is no active user named {data['username']!r}."]})
        membership = services.membership_set(actor=request.user, team=team, user=user, role=data["role"],
                                             source_ip=source_ip(request))
        return Response(MemberSerializer(membership).data, status=status.HTTP_201_CREATED)


class MemberDetailView(APIView):
    def _membership(self, request, slug, username):
        team = selectors.team_get(user=request.user, slug=slug)
        membership = selectors.membership_named(team=team, username=username)
        if membership is None:
            raise Http404(f"{username} is not a member of {team.slug}")
        return team, membership

    @extend_schema(responses=MemberSerializer)
    def get(self, request, slug, username):
        return Response(MemberSerializer(self._membership(request, slug, username)[1]).data)

    @extend_schema(request=MemberRoleInputSerializer, responses=MemberSerializer, summary="Change a member's role")
    def patch(self, request, slug, username):
        team, membership = self._membership(request, slug, username)
        data = valid_input(MemberRoleInputSerializer, request)
        membership = services.membership_set(actor=request.user, team=team, user=membership.user, role=data["role"],
                                             source_ip=source_ip(request))
        return Response(MemberSerializer(membership).data)

    @extend_schema(responses={204: None}, summary="Remove a member")
    def delete(self, request, slug, username):
        team, membership = self._membership(request, slug, username)
        services.membership_remove(actor=request.user, team=team, user=membership.user, source_ip=source_ip(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ClusterListView(generics.ListAPIView):
    serializer_class = ClusterSerializer
    ordering = "name"

    def get_queryset(self):
        return selectors.cluster_list()


class ClusterDetailView(APIView):
    @extend_schema(responses=ClusterSerializer)
    def get(self, request, name):
        return Response(ClusterSerializer(selectors.cluster_get(name=name)).data)


class FlavorListView(generics.ListAPIView):
    serializer_class = FlavorSerializer
    ordering = "id"

    @extend_schema(parameters=[OpenApiParameter("cluster", str, description="Only this cluster's flavors")])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        return selectors.flavor_list(cluster_name=self.request.query_params.get("cluster"))

