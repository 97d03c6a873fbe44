from django.contrib import admin

from .models import Job, JobTemplate


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("pk", "name", "team", "kind", "cluster", "flavor", "workers", "gpus_per_worker", "state",
                    "submitted_by", "submitted_at")
    list_filter = ("state", "kind", "cluster")
    search_fields = ("name", "team__slug", "submitted_by__username")
    list_select_related = ("team", "cluster", "flavor", "submitted_by")
    # Jobs are submitted and cancelled through the portal, which validates and reconciles them.
    readonly_fields = [f.name for f in Job._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(JobTemplate)
class JobTemplateAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "kind", "created_by", "created_at")
    list_filter = ("kind",)
    search_fields = ("name", "team__slug")
