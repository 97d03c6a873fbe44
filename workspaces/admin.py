from django.contrib import admin

from .models import Workspace


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "cluster", "flavor", "tool", "stage", "owner", "created_at")
    list_filter = ("stage", "tool", "cluster")
    search_fields = ("name", "team__slug", "owner__username")
    readonly_fields = [f.name for f in Workspace._meta.fields]

    def has_add_permission(self, request):
        return False  # started from the portal, so it queues under the team's quota
