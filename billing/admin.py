"""Read-only listings of collected usage and the collection ledger; rows are written only by collection, which the
ledger's action can ask for again (audited, through the service)."""

from django.contrib import admin, messages

from portal.http import source_ip
from tenants.admin import ReadOnlyAdmin
from tenants.selectors import is_platform_admin

from . import services
from .models import CollectedHour, JobUsageHour, UsageHour


@admin.register(UsageHour)
class UsageHourAdmin(ReadOnlyAdmin):
    list_display = ("hour", "team", "flavor", "cluster", "namespace", "allocated_gpu_hours", "used_gpu_hours",
                    "gpu_memory_used_gib_avg", "energy_kwh")
    list_filter = ("cluster", "flavor")
    search_fields = ("team__slug", "namespace")
    list_select_related = ("team", "flavor", "cluster")
    date_hierarchy = "hour"
    ordering = ("-hour", "team__slug")


@admin.register(JobUsageHour)
class JobUsageHourAdmin(ReadOnlyAdmin):
    list_display = ("hour", "job", "flavor", "allocated_gpu_hours", "used_gpu_hours", "utilisation_avg")
    list_filter = ("flavor__cluster",)
    search_fields = ("job__name", "job__team__slug")
    list_select_related = ("job__team", "flavor")
    date_hierarchy = "hour"
    ordering = ("-hour", "job")


@admin.register(CollectedHour)
class CollectedHourAdmin(ReadOnlyAdmin):
    list_display = ("hour", "cluster", "state", "attempts", "collected_at", "message")
    list_filter = ("state", "cluster")
    list_select_related = ("cluster",)
    date_hierarchy = "hour"
    ordering = ("-hour", "cluster__name")
    actions = ["recollect"]

    def has_recollect_permission(self, request):
        return is_platform_admin(request.user)

    @admin.action(description="Collect the selected hours again", permissions=["recollect"])
    def recollect(self, request, queryset):
        queued = services.usage_recollect(actor=request.user, ledgers=list(queryset.order_by("pk")),
                                          source_ip=source_ip(request))
        self.message_user(request, f"{queued} hour(s) queued for collection.", messages.SUCCESS)
