"""Django admin for jobs: read-only. Jobs are submitted, cancelled and resubmitted through the portal, and their rows
are the history usage and statements are built from; a template's delete goes through the service (audited)."""

from django.contrib import admin

from portal.http import source_ip
from tenants.admin import ReadOnlyAdmin

from . import services
from .models import Job, JobTemplate


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    # Read-only, deletes included: a job ends by cancelling it, which deletes its objects in the cluster and keeps
    # its history.
    list_display = ("pk", "name", "team", "kind", "cluster", "flavor", "workers", "gpus_per_worker", "state",
                    "submitted_by", "submitted_at")
    list_filter = ("state", "kind", "cluster")
    search_fields = ("name", "team__slug", "submitted_by__username")
    list_select_related = ("team", "cluster", "flavor", "submitted_by")


@admin.register(JobTemplate)
class JobTemplateAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "kind", "created_by", "created_at")
    list_filter = ("kind",)
    search_fields = ("name", "team__slug")
    list_select_related = ("team", "created_by")

    def has_add_permission(self, request):
        return False  # templates are saved from the submit form, where their values are checked

    def has_change_permission(self, request, obj=None):
        return False

    def delete_model(self, request, obj):
        services.job_template_delete(actor=request.user, template=obj, source_ip=source_ip(request))

    def delete_queryset(self, request, queryset):
        for template in queryset.select_related("team").order_by("pk"):
            self.delete_model(request, template)
