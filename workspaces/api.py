"""API views of workspaces: start (the answer holds the access token, once), list, read, suspend, resume, keep
running, delete; and the images the platform offers. The same services as the pages, so the same checks apply."""

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api import valid_input
from portal.http import source_ip
from tenants import selectors as tenant_selectors

from . import selectors, services
from .serializers import WorkspaceCreatedSerializer, WorkspaceCreateSerializer, WorkspaceSerializer

__all__ = ["WorkspaceCreatedSerializer"]


def _team(user, slug: str | None):
    if slug is not None:
        return tenant_selectors.team_get(user=user, slug=slug)
    teams = list(tenant_selectors.submit_team_list(user=user)[:2])
    if len(teams) == 1:
        return teams[0]
    raise ValidationError({"team": ["Name the team: you belong to several." if teams else
                                    "You start workspaces for no team: ask a team admin to make you a member."]})


class WorkspaceListView(APIView):
    @extend_schema(responses=WorkspaceSerializer(many=True), summary="Your teams' workspaces, newest first")
    def get(self, request):
        rows = selectors.workspace_list(user=request.user)[:200]
        return Response(WorkspaceSerializer(rows, many=True).data)

    @extend_schema(request=WorkspaceCreateSerializer, responses={201: WorkspaceCreatedSerializer},
                   summary="Start a workspace (team admins and members); its access token is in this answer only")
    def post(self, request):
        data = valid_input(WorkspaceCreateSerializer, request)
        team = _team(request.user, data.pop("team", None))
        flavor = tenant_selectors.flavor_named(name=data.pop("flavor"), cluster=data.pop("cluster", None))
        priority = data.pop("priority", None)
        tier = None if priority is None else tenant_selectors.tier_named(name=priority)
        workspace, token = services.workspace_create(actor=request.user, team=team, flavor=flavor,
                                                     priority_tier=tier, source_ip=source_ip(request), **data)
        workspace = selectors.workspace_get(user=request.user, pk=workspace.pk)
        body = {**WorkspaceSerializer(workspace).data, "access_token": token}
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})


class WorkspaceImagesView(APIView):
    @extend_schema(responses={200: dict}, summary="The images the platform offers, per tool")
    def get(self, request):
        return Response({"images": {tool: selectors.images(tool) for tool in settings.WORKSPACE_IMAGES},
                         "any_image": settings.WORKSPACE_ANY_IMAGE})


class WorkspaceDetailView(APIView):
    @extend_schema(responses=WorkspaceSerializer)
    def get(self, request, pk):
        return Response(WorkspaceSerializer(selectors.workspace_get(user=request.user, pk=pk)).data)

    @extend_schema(request=None, responses=WorkspaceSerializer,
                   summary="Delete (the owner or a team admin): its run, Service and home volume go")
    def delete(self, request, pk):
        workspace = selectors.workspace_get(user=request.user, pk=pk)
        services.workspace_delete(actor=request.user, workspace=workspace, source_ip=source_ip(request))
        return Response(WorkspaceSerializer(selectors.workspace_get(user=request.user, pk=pk)).data)


def _action(write, summary: str):
    class View(APIView):
        @extend_schema(request=None, responses=WorkspaceSerializer, summary=summary)
        def post(self, request, pk):
            workspace = selectors.workspace_get(user=request.user, pk=pk)
            write(actor=request.user, workspace=workspace, source_ip=source_ip(request))
            return Response(WorkspaceSerializer(selectors.workspace_get(user=request.user, pk=pk)).data)

    return View


WorkspaceSuspendView = _action(services.workspace_suspend, "Suspend: the pod goes, the quota is freed, the volume "
                                                           "stays")
WorkspaceResumeView = _action(services.workspace_resume, "Resume: queue again with the same volume")
WorkspaceKeepView = _action(services.workspace_keep, "Keep running: hold off the idle rule for the platform's "
                                                     "extension")
