from django.contrib import admin

from .models import Quota, QuotaRequest


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ("team", "flavor", "guaranteed", "burst", "cpu_cores", "memory_gib", "expires_at")
    list_filter = ("flavor__cluster", "flavor")
    search_fields = ("team__slug", "flavor__name")
    list_select_related = ("team", "flavor__cluster")
    # Changes go through the approvals queue so they are capacity-checked, audited and reconciled.
    readonly_fields = [f.name for f in Quota._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # grants end through the approvals queue or expiry, which reconcile and audit


@admin.register(QuotaRequest)
class QuotaRequestAdmin(admin.ModelAdmin):
    list_display = ("pk", "team", "flavor", "guaranteed", "burst", "state", "requested_by", "requested_at",
                    "decided_by")
    list_filter = ("state", "flavor__cluster")
    search_fields = ("team__slug", "justification")
    list_select_related = ("team", "flavor__cluster", "requested_by", "decided_by")
    readonly_fields = [f.name for f in QuotaRequest._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # requests are the decision history, kept like the audit log
