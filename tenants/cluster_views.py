"""The console's cluster registration: the form a platform admin fills in, with a connection test before saving."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render

from portal.http import add_service_errors, platform_admin_required, source_ip

from . import selectors, services
from .forms import ClusterForm
from .models import Cluster


@platform_admin_required
def console_cluster_create(request):
    """GET: the form. POST with `test`: try the connection and show the answer, keeping what was typed. POST: save
    it (namespaces for every team follow through reconcile) and open its page."""
    form = ClusterForm(request.POST or None)
    probe = None
    if request.method == "POST" and form.is_valid():
        if "test" in request.POST:
            ok, detail = selectors.cluster_reachable(Cluster(**form.connection_fields()))
            probe = {"ok": ok, "detail": detail}
        else:
            try:
                cluster = services.cluster_create(actor=request.user, source_ip=source_ip(request),
                                                  **form.connection_fields())
            except ValidationError as exc:
                add_service_errors(form, exc)
            else:
                messages.success(request, f"Cluster {cluster.name} registered; its objects and the teams' "
                                          "namespaces are being applied.")
                return redirect("tenants:cluster-detail", name=cluster.name)
    return render(request, "tenants/console/cluster_form.html", {"form": form, "probe": probe},
                  status=400 if form.errors else 200)
