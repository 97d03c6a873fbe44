"""The team's webhook page (team admins): set or remove the address, rotate the secret (shown once), and see how
the latest notices went."""

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from portal.http import add_service_errors, source_ip

from . import selectors, webhooks
from .choices import Role
from .models import TeamWebhook, WebhookDelivery


class WebhookForm(forms.Form):
    url = forms.URLField(required=False, max_length=500, label="Address", assume_scheme="https",
                         help_text="Receives signed JSON when work is lost; leave empty to remove.",
                         widget=forms.URLInput(attrs={"class": "input-wide"}))
    rotate = forms.BooleanField(required=False, label="Make a new secret")


@never_cache  # the answer to a change may hold the secret
@login_required
def team_webhook(request, slug):
    team = selectors.team_get(user=request.user, slug=slug)
    if selectors.team_role(user=request.user, team=team) != Role.ADMIN:
        raise PermissionDenied("Only the team's admins can see and set its webhook.")
    hook = TeamWebhook.objects.filter(team=team).only("url", "updated_at").first()
    form = WebhookForm(request.POST or None, initial={"url": hook.url if hook else ""})
    secret = None
    if request.method == "POST" and form.is_valid():
        try:
            hook, secret = webhooks.team_webhook_set(actor=request.user, team=team, url=form.cleaned_data["url"],
                                                     rotate=form.cleaned_data["rotate"],
                                                     source_ip=source_ip(request))
        except ValidationError as exc:
            add_service_errors(form, exc)
    deliveries = WebhookDelivery.objects.filter(team=team)[:20]
    return render(request, "tenants/team_webhook.html", {
        "team": team, "form": form, "hook": hook, "secret": secret, "deliveries": deliveries,
        "headers": (webhooks.EVENT_HEADER, webhooks.TIMESTAMP_HEADER, webhooks.SIGNATURE_HEADER)})
