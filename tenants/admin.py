"""Django admin for tenancy: read-mostly. Saves and actions go through services, so they are validated,
audited and reconciled exactly like the same change made from a portal page."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from portal.http import source_ip

from . import checks, cluster_parts, services
from .choices import TeamState
from .models import AuditEvent, Cluster, GpuFlavor, Membership, PriorityTier, Team, TeamNamespace

RECONCILE_STATUS_FIELDS = ("generation", "observed_generation", "conditions", "attempts", "next_attempt_at",
                           "synced_at", "objects_status")


def _report(modeladmin, request, done: int, failures: list[str], verb: str) -> None:
    if done:
        modeladmin.message_user(request, f"{done} {verb}.", messages.SUCCESS)
    for failure in failures:
        modeladmin.message_user(request, failure, messages.ERROR)


@admin.action(description="Reconcile again now")
def retry_reconcile(modeladmin, request, queryset):
    for row in queryset:
        services.reconcile_retry(actor=request.user, row=row, source_ip=source_ip(request))
    _report(modeladmin, request, queryset.count(), [], "queued for reconcile")


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written only by the portal itself (audit events, collected usage, jobs): listed, never edited here."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class AuditedDeleteMixin:
    """Deletes (the delete page and the bulk action) go through a service: one audit event per row, with the actor."""

    def delete_model(self, request, obj):
        services.admin_object_delete(actor=request.user, obj=obj, source_ip=source_ip(request))

    def delete_queryset(self, request, queryset):
        for obj in queryset.order_by("pk"):
            self.delete_model(request, obj)


class SyncStateMixin:
    @admin.display(description="sync")
    def sync(self, obj):
        return obj.sync_state

    @admin.display(description="message")
    def message(self, obj):
        return obj.sync_message[:120]


class ClusterAdminForm(forms.ModelForm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:  # what other apps keep for the cluster (cluster_parts), as it is now
            self.initial = {**cluster_parts.snapshot(self.instance), **self.initial}

    def clean(self):
        data = super().clean()
        if self.instance.pk and data.get("overcommit") is not None:
            checks.capacity_checks_run("cluster", cluster=self.instance, overcommit=data["overcommit"])
        return data


class GpuFlavorAdminForm(forms.ModelForm):
    def clean(self):
        data = super().clean()
        if self.instance.pk and data.get("cluster") and data.get("capacity") is not None:
            checks.capacity_checks_run("flavor", flavor=self.instance, capacity=data["capacity"],
                                         overcommit=data["cluster"].overcommit)
        return data


@admin.register(Cluster)
class ClusterAdmin(AuditedDeleteMixin, SyncStateMixin, admin.ModelAdmin):
    form = ClusterAdminForm
    list_display = ("name", "display_name", "scheduler", "connection", "active", "sync", "message")
    list_filter = ("scheduler", "connection", "active")
    search_fields = ("name", "display_name", "server", "context")
    readonly_fields = RECONCILE_STATUS_FIELDS + ("created_at",)
    actions = [retry_reconcile]

    def get_form(self, request, obj=None, **kwargs):
        # The settings other apps keep for a cluster (registered once apps are ready) are fields of the same page.
        kwargs["form"] = type("ClusterAdminForm", (ClusterAdminForm,), cluster_parts.form_fields())
        return super().get_form(request, obj, **kwargs)

    def get_queryset(self, request):
        return super().get_queryset(request).select_related(*cluster_parts.related_names())

    def save_model(self, request, obj, form, change):
        fields = {name: getattr(obj, name) for name in services.CLUSTER_FIELDS}
        fields |= {name: form.cleaned_data[name] for name in cluster_parts.field_names() if name in form.cleaned_data}
        if change:
            services.cluster_update(actor=request.user, cluster=obj, source_ip=source_ip(request), **fields)
        else:
            obj.pk = services.cluster_create(actor=request.user, source_ip=source_ip(request), **fields).pk


@admin.register(GpuFlavor)
class GpuFlavorAdmin(AuditedDeleteMixin, admin.ModelAdmin):
    form = GpuFlavorAdminForm
    list_display = ("name", "cluster", "resource_name", "gpu_model", "capacity", "gpus_per_node", "memory_gb",
                    "gpu_fraction", "sharing")
    list_filter = ("cluster", "sharing", "resource_name")
    search_fields = ("name", "resource_name", "gpu_model")
    list_select_related = ("cluster",)

    def save_model(self, request, obj, form, change):
        services.gpu_flavor_save(actor=request.user, flavor=obj, source_ip=source_ip(request))


@admin.register(PriorityTier)
class PriorityTierAdmin(AuditedDeleteMixin, admin.ModelAdmin):
    list_display = ("name", "value", "preemption_policy", "is_default", "description")
    list_filter = ("preemption_policy", "is_default")
    search_fields = ("name", "description")

    def save_model(self, request, obj, form, change):
        services.priority_tier_save(actor=request.user, tier=obj, source_ip=source_ip(request))


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ("user",)


def _set_state(state: str, description: str):
    @admin.action(description=description)
    def action(modeladmin, request, queryset):
        done, failures = 0, []
        for team in queryset:
            try:
                services.team_set_state(actor=request.user, team=team, state=state, source_ip=source_ip(request))
                done += 1
            except ValidationError as exc:
                failures.append(f"{team.slug}: {' '.join(exc.messages)}")
        _report(modeladmin, request, done, failures, f"team(s) now {state}")

    action.__name__ = f"set_state_{state}"
    return action


@admin.register(Team)
class TeamAdmin(AuditedDeleteMixin, admin.ModelAdmin):
    list_display = ("slug", "name", "cost_center", "parent", "state", "idp_group", "created_at")
    list_filter = ("state", "parent")
    search_fields = ("slug", "name", "cost_center", "idp_group")
    list_select_related = ("parent",)
    inlines = [MembershipInline]
    actions = [_set_state(TeamState.SUSPENDED, "Suspend"), _set_state(TeamState.ACTIVE, "Reactivate"),
               _set_state(TeamState.ARCHIVED, "Archive")]

    def get_readonly_fields(self, request, obj=None):
        # The slug is the namespace; the state changes through the actions (they reconcile and audit).
        readonly = ("state", "namespace_deletion_confirmed_at", "created_at")
        return ("slug",) + readonly if obj else readonly

    def save_model(self, request, obj, form, change):
        fields = {"name": obj.name, "cost_center": obj.cost_center, "idp_group": obj.idp_group, "parent": obj.parent}
        if change:
            services.team_update(actor=request.user, team=obj, source_ip=source_ip(request), **fields)
        else:
            obj.pk = services.team_create(actor=request.user, slug=obj.slug, source_ip=source_ip(request),
                                          **fields).pk

    def save_formset(self, request, form, formset, change):
        """Memberships through the services: audited, reconciled, and the last admin is kept."""
        team = form.instance
        for membership in formset.save(commit=False):
            self._service(request, services.membership_set, team=team, user=membership.user, role=membership.role)
        for membership in formset.deleted_objects:
            self._service(request, services.membership_remove, team=team, user=membership.user)

    def _service(self, request, service, **kwargs):
        try:
            service(actor=request.user, source_ip=source_ip(request), **kwargs)
        except ValidationError as exc:
            self.message_user(request, f"{kwargs['user']}: {' '.join(exc.messages)}", messages.ERROR)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    """Listing and search only: members are changed on the team (inline) or the team page."""

    list_display = ("user", "team", "role")
    list_filter = ("role", "team")
    search_fields = ("user__username", "user__email", "team__slug", "team__name")
    list_select_related = ("user", "team")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def delete_model(self, request, obj):
        # Through the service: audited, reconciled, and a team keeps its last admin.
        try:
            services.membership_remove(actor=request.user, team=obj.team, user=obj.user, source_ip=source_ip(request))
        except ValidationError as exc:
            self.message_user(request, f"{obj}: {' '.join(exc.messages)}", messages.ERROR)

    def delete_queryset(self, request, queryset):
        for obj in queryset.select_related("team", "user").order_by("pk"):
            self.delete_model(request, obj)


@admin.register(TeamNamespace)
class TeamNamespaceAdmin(AuditedDeleteMixin, SyncStateMixin, admin.ModelAdmin):
    """Status rows written by reconcile: read-only apart from the retry action."""

    list_display = ("__str__", "team", "cluster", "sync", "attempts", "next_attempt_at", "synced_at", "message")
    list_filter = ("cluster", "team__state")
    search_fields = ("team__slug", "team__name", "cluster__name")
    list_select_related = ("team", "cluster")
    readonly_fields = ("team", "cluster", "deleted_at", "usage") + RECONCILE_STATUS_FIELDS
    actions = [retry_reconcile]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "action", "object_type", "object_repr", "team", "source_ip")
    list_filter = ("action", "object_type", "team")
    search_fields = ("action", "object_repr", "object_id", "actor__username", "team__slug")
    list_select_related = ("actor", "team")
    date_hierarchy = "at"
    readonly_fields = [f.name for f in AuditEvent._meta.fields]
