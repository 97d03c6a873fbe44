from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from portal.http import add_service_errors, confirmed_write, source_ip
from tenants import selectors as tenant_selectors
from tenants.choices import Role

from . import selectors, services
from .forms import WorkspaceForm


@login_required
def workspace_list(request):
    rows = list(selectors.workspace_list(user=request.user))
    return render(request, "workspaces/workspace_list.html", {
        "workspaces": rows, "teams": tenant_selectors.submit_team_list(user=request.user)})


def _detail_context(request, workspace) -> dict:
    return {"workspace": workspace, "run": workspace.run, "way_in": selectors.way_in(workspace),
            "why_waiting": selectors.why_waiting(workspace),
            "events": selectors.workspace_events(workspace=workspace),
            "is_owner": workspace.owner_id == request.user.pk}


@login_required
def workspace_detail(request, pk):
    workspace = selectors.workspace_get(user=request.user, pk=pk)
    return render(request, "workspaces/workspace_detail.html", _detail_context(request, workspace))


@never_cache  # the answer to a creation holds the access token: no cache may keep it
@login_required
def workspace_create(request, slug):
    team = tenant_selectors.team_get(user=request.user, slug=slug)
    if tenant_selectors.team_role(user=request.user, team=team) not in (Role.ADMIN, Role.MEMBER):
        raise PermissionDenied("Viewers cannot start workspaces.")
    flavors = selectors.workspace_flavors(team=team)
    form = WorkspaceForm(request.POST or None, flavors=flavors)
    if request.method == "POST" and form.is_valid():
        try:
            workspace, token = services.workspace_create(actor=request.user, team=team, **form.cleaned_data,
                                                         source_ip=source_ip(request))
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            # Shown here once: only its hash is kept, so not even this page can show it again.
            context = {**_detail_context(request, workspace), "token": token}
            return render(request, "workspaces/workspace_detail.html", context, status=201)
    return render(request, "workspaces/workspace_form.html", {"team": team, "form": form})


ACTIONS = {
    "suspend": (services.workspace_suspend, "Suspending: its pod goes and its GPUs go back to the team; the home "
                                            "volume stays."),
    "resume": (services.workspace_resume, "Resumed: it queues again with the same volume."),
    "keep": (services.workspace_keep, "Kept running: the idle rule leaves it alone for a while."),
}


@require_POST
@login_required
def workspace_action(request, pk, action):
    workspace = selectors.workspace_get(user=request.user, pk=pk)
    try:
        if action == "delete":
            asked = confirmed_write(
                request, lambda: services.workspace_delete(actor=request.user, workspace=workspace,
                                                           source_ip=source_ip(request)),
                question=f"Delete workspace {workspace.name}?", consequence="confirm/workspace_delete.txt",
                context={"workspace": workspace}, yes="Yes, delete it and its volume",
                back=reverse("workspaces:workspace-detail", args=[workspace.pk]))
            if isinstance(asked, HttpResponse):
                return asked
            messages.success(request, "Deleting: its pod, Service and home volume are being removed.")
        elif action in ACTIONS:
            write, said = ACTIONS[action]
            write(actor=request.user, workspace=workspace, source_ip=source_ip(request))
            messages.success(request, said)
        else:
            raise Http404("Unknown action")
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("workspaces:workspace-detail", pk=workspace.pk)
