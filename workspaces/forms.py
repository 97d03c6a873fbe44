from django import forms
from django.conf import settings

from jobs.models import IMAGE_MESSAGE, IMAGE_RE
from tenants.models import GpuFlavor, PriorityTier

from . import selectors
from .choices import Tool


class WorkspaceForm(forms.Form):
    name = forms.RegexField(regex=r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$", max_length=40,
                            error_messages={"invalid": "Lowercase letters, digits and '-', at most 40 characters."})
    tool = forms.ChoiceField(choices=Tool.choices, initial=Tool.JUPYTERLAB)
    image = forms.CharField(max_length=300, help_text="One of the platform's images for the tool.")
    flavor = forms.ModelChoiceField(queryset=GpuFlavor.objects.none(),
                                    help_text="Whole GPUs, MIG slices or shared GPUs, as the team's quota holds them.")
    gpus = forms.IntegerField(min_value=1, max_value=64, initial=1, label="GPUs")
    cpu = forms.IntegerField(min_value=1, max_value=512, initial=4, label="CPU cores")
    memory_gib = forms.IntegerField(min_value=1, max_value=4096, initial=32, label="Memory (GiB)")
    volume_gib = forms.IntegerField(min_value=1, max_value=10240, initial=50, label="Home volume (GiB)",
                                    help_text="Kept while the workspace is suspended.")
    priority_tier = forms.ModelChoiceField(queryset=PriorityTier.objects.all(), required=False, label="Priority tier")

    def __init__(self, *args, flavors=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["flavor"].queryset = flavors if flavors is not None else GpuFlavor.objects.none()
        self.fields["flavor"].label_from_instance = lambda f: f"{f.cluster.name} · {f.name} ({f.resource_name})"
        if not settings.WORKSPACE_ANY_IMAGE:
            groups = [(label, [(image, image) for image in selectors.images(tool)]) for tool, label in Tool.choices]
            first = next((items[0][0] for _, items in groups if items), "")
            self.fields["image"] = forms.ChoiceField(choices=groups, initial=first,
                                                     help_text="The platform's images, by tool: pick one of the "
                                                               "chosen tool's.")

    def clean_image(self):
        image = self.cleaned_data["image"]
        if not IMAGE_RE.fullmatch(image):
            raise forms.ValidationError(IMAGE_MESSAGE)
        return image
