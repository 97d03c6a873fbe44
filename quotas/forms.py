from django import forms
from django.utils import timezone

from portal.limits import LATEST_YEAR, year_in_range
from quotas.models import MAX_CPU_CORES, MAX_MEMORY_GIB, MAX_STORAGE_GIB, MAX_UNITS
from tenants.models import GpuFlavor, PriorityTier


class QuotaRequestForm(forms.Form):
    flavor = forms.ModelChoiceField(queryset=GpuFlavor.objects.none(), help_text="Cluster and GPU flavor")
    guaranteed = forms.IntegerField(min_value=0, max_value=MAX_UNITS, help_text="Units reserved for the team")
    burst = forms.IntegerField(min_value=0, max_value=MAX_UNITS, initial=0,
                               help_text="Units the team may borrow from idle capacity")
    cpu_cores = forms.IntegerField(min_value=0, max_value=MAX_CPU_CORES, required=False,
                                   help_text="Defaults to 8 cores per guaranteed GPU")
    memory_gib = forms.IntegerField(min_value=0, max_value=MAX_MEMORY_GIB, required=False,
                                    help_text="Defaults to 64 GiB per guaranteed GPU")
    storage_gib = forms.IntegerField(min_value=0, max_value=MAX_STORAGE_GIB, required=False, initial=0)
    ends_at = forms.DateTimeField(required=False, label="Ends at (UTC, optional)",
                                  widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
                                  help_text="For a time-boxed grant: it reverts automatically then")
    justification = forms.CharField(min_length=10, max_length=2000, widget=forms.Textarea(attrs={"rows": 3}))

    def __init__(self, *args, flavors=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["flavor"].queryset = flavors if flavors is not None else GpuFlavor.objects.none()
        self.fields["flavor"].label_from_instance = lambda f: f"{f.cluster.name} · {f.name} ({f.resource_name})"

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


class ApproveForm(forms.Form):
    guaranteed = forms.IntegerField(min_value=0, max_value=MAX_UNITS)
    burst = forms.IntegerField(min_value=0, max_value=MAX_UNITS)
    note = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))


class RejectForm(forms.Form):
    note = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 2}),
                           help_text="The team sees this")


class GpuFlavorForm(forms.ModelForm):
    class Meta:
        model = GpuFlavor
        fields = ["cluster", "name", "resource_name", "gpu_model", "capacity", "gpus_per_node", "memory_gb",
                  "gpu_fraction", "sharing", "mig_slices_per_gpu", "node_labels", "node_taints", "tolerations"]


class PriorityTierForm(forms.ModelForm):
    class Meta:
        model = PriorityTier
        fields = ["name", "value", "preemption_policy", "description", "is_default"]
