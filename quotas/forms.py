from django import forms
from django.utils import timezone

from portal.limits import LATEST_YEAR, year_in_range
from quotas.models import MAX_CPU_CORES, MAX_MEMORY_GIB, MAX_STORAGE_GIB, MAX_UNITS
from tenants.models import GpuFlavor, PriorityTier


class QuotaRequestForm(forms.Form):
    flavor = forms.ModelChoiceField(queryset=GpuFlavor.objects.none(), label="Cluster and GPU flavor")
    guaranteed = forms.IntegerField(min_value=0, max_value=MAX_UNITS, label="Guaranteed units (new total)",
                                    help_text="Units reserved for the team: the total it should hold, not an addition")
    burst = forms.IntegerField(min_value=0, max_value=MAX_UNITS, initial=0, label="Burst units (new total)",
                               help_text="Units the team may borrow from idle capacity")
    cpu_cores = forms.IntegerField(min_value=0, max_value=MAX_CPU_CORES, required=False, label="CPU cores",
                                   help_text="What this flavor's jobs run with; defaults to 8 cores per guaranteed "
                                             "GPU")
    memory_gib = forms.IntegerField(min_value=0, max_value=MAX_MEMORY_GIB, required=False, label="Memory (GiB)",
                                    help_text="What this flavor's jobs run with; defaults to 64 GiB per guaranteed "
                                              "GPU")
    storage_gib = forms.IntegerField(min_value=0, max_value=MAX_STORAGE_GIB, required=False, initial=0,
                                     label="Storage (GiB)")
    ends_at = forms.DateTimeField(required=False, label="Ends at (UTC, optional)",
                                  widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
                                  help_text="For a time-boxed grant: it reverts automatically then")
    justification = forms.CharField(min_length=10, max_length=2000, widget=forms.Textarea(attrs={"rows": 3}))

    def __init__(self, *args, flavors=None, held=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["flavor"].queryset = flavors if flavors is not None else GpuFlavor.objects.none()
        held = held or {}

        def label(flavor):
            text = f"{flavor.cluster.name} · {flavor.name} ({flavor.resource_name})"
            quota = held.get(flavor.pk)
            return f"{text}: holds {quota.guaranteed} + {quota.burst}" if quota else f"{text}: holds none"

        self.fields["flavor"].label_from_instance = label

    def clean_ends_at(self):
        ends_at = self.cleaned_data.get("ends_at")
        if ends_at and ends_at <= timezone.now():
            raise forms.ValidationError("The end date must be in the future.")
        if ends_at and not year_in_range(ends_at.year):
            raise forms.ValidationError(f"The end date must be before {LATEST_YEAR + 1}.")
        return ends_at

    def clean(self):
        data = super().clean()
        guaranteed = data.get("guaranteed") or 0
        if data.get("cpu_cores") is None:
            data["cpu_cores"] = 8 * guaranteed
        if data.get("memory_gib") is None:
            data["memory_gib"] = 64 * guaranteed
        data["storage_gib"] = data.get("storage_gib") or 0
        return data


_LOCAL = "datetime-local"


class ReservationForm(forms.Form):
    flavor = forms.ModelChoiceField(queryset=GpuFlavor.objects.none(), label="Cluster and GPU flavor")
    units = forms.IntegerField(min_value=1, max_value=MAX_UNITS, label="Units",
                               help_text="Guaranteed on top of what the team holds, for the whole window")
    starts_at = forms.DateTimeField(label="Starts at (UTC)", widget=forms.DateTimeInput(attrs={"type": _LOCAL}))
    ends_at = forms.DateTimeField(label="Ends at (UTC)", widget=forms.DateTimeInput(attrs={"type": _LOCAL}))
    justification = forms.CharField(min_length=10, max_length=2000, widget=forms.Textarea(attrs={"rows": 3}))

    def __init__(self, *args, flavors=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["flavor"].queryset = flavors if flavors is not None else GpuFlavor.objects.none()
        self.fields["flavor"].label_from_instance = lambda f: f"{f.cluster.name} · {f.name} ({f.resource_name})"

    def clean(self):
        data = super().clean()
        starts, ends = data.get("starts_at"), data.get("ends_at")
        for name in ("starts_at", "ends_at"):
            if data.get(name) and not year_in_range(data[name].year):
                self.add_error(name, f"Use a date before {LATEST_YEAR + 1}.")
        if starts and starts <= timezone.now():
            self.add_error("starts_at", "A reservation starts in the future.")
        if starts and ends and ends <= starts:
            self.add_error("ends_at", "The window must end after it starts.")
        return data


class QuotaSetForm(forms.Form):
    """A platform admin's direct change of a team's quota (from a right-sizing recommendation, say)."""

    guaranteed = forms.IntegerField(min_value=0, max_value=MAX_UNITS, label="Guaranteed units")
    burst = forms.IntegerField(min_value=0, max_value=MAX_UNITS, label="Burst units")
    cpu_cores = forms.IntegerField(min_value=0, max_value=MAX_CPU_CORES, label="CPU cores")
    memory_gib = forms.IntegerField(min_value=0, max_value=MAX_MEMORY_GIB, label="Memory (GiB)")
    storage_gib = forms.IntegerField(min_value=0, max_value=MAX_STORAGE_GIB, label="Storage (GiB)")


class ApproveForm(forms.Form):
    guaranteed = forms.IntegerField(min_value=0, max_value=MAX_UNITS, label="Guaranteed units")
    burst = forms.IntegerField(min_value=0, max_value=MAX_UNITS, label="Burst units")
    note = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}),
                           label="Note to the team (optional)")

    def amounts(self, *, default: tuple[int, int]) -> tuple[int, int]:
        """The typed guaranteed and burst, each where it is a valid number (the default's where it is not)."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return data.get("guaranteed", default[0]), data.get("burst", default[1])


class RejectForm(forms.Form):
    note = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 2}),
                           label="Reason for rejecting", help_text="The team sees this")


class GpuFlavorForm(forms.ModelForm):
    class Meta:
        model = GpuFlavor
        fields = ["cluster", "name", "resource_name", "gpu_model", "capacity", "gpus_per_node", "memory_gb",
                  "gpu_fraction", "sharing", "replicas", "device_class", "device_selector", "mig_slices_per_gpu",
                  "spot", "node_labels", "node_taints", "tolerations"]
        labels = {"spot": "Spot capacity", "resource_name": "Resource name", "gpu_model": "GPU model",
                  "capacity": "Capacity (units)",
                  "gpus_per_node": "GPUs per node", "memory_gb": "Memory per GPU (GB)",
                  "gpu_fraction": "Fraction of a full GPU per unit", "node_labels": "Node labels (JSON)",
                  "node_taints": "Node taints (JSON)", "tolerations": "Tolerations (JSON)",
                  "replicas": "Replicas per GPU", "device_class": "DeviceClass",
                  "device_selector": "Device selector (CEL, optional)"}
        widgets = {"device_selector": forms.Textarea(attrs={"rows": 2})}
        help_texts = {"capacity": "Units of this flavor the cluster has: the scheduler's nominal quota for it. "
                                  "Teams' guarantees may add up to capacity × the cluster's overcommit."}


class PriorityTierForm(forms.ModelForm):
    class Meta:
        model = PriorityTier
        fields = ["name", "value", "preemption_policy", "description", "is_default", "idle_action",
                  "budget_hold_action"]
        labels = {"value": "Priority value", "preemption_policy": "Preemption policy",
                  "is_default": "Default tier for new jobs", "idle_action": "Idle batch jobs",
                  "budget_hold_action": "Running jobs when the team's budget holds"}


class FairShareWeightForm(forms.Form):
    weight = forms.IntegerField(min_value=1, max_value=65535, label="Fair-share weight")
