import shlex

from django import forms

from tenants.choices import Sharing
from tenants.models import GpuFlavor, PriorityTier

from .choices import JobKind, Placement
from .models import ENV_NAME_RE, MAX_WORKERS
from .placement import SPOT_WARNING

DEFAULT_COMMANDS = {
    JobKind.PYTORCH: "torchrun train.py --epochs 3",
    JobKind.RAY: "python tune.py --trials 16",
    JobKind.BATCH: "python evaluate.py --split test",
}


class JobSubmitForm(forms.Form):
    flavor = forms.ModelChoiceField(queryset=GpuFlavor.objects.none())
    name = forms.RegexField(regex=r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$", max_length=40,
                            error_messages={"invalid": "Lowercase letters, digits and '-', at most 40 characters."},
                            help_text="Its objects are named after it and the job's number; a name that starts "
                                      "with a digit gets an x- in front (1st-run → x-1st-run-12).")
    image = forms.CharField(max_length=300, help_text="e.g. ghcr.io/acme/train:1.2",
                            widget=forms.TextInput(attrs={"class": "input-wide"}))
    command = forms.CharField(max_length=8000, widget=forms.TextInput(attrs={"class": "input-wide"}),
                              help_text="Split into arguments like a shell would, but never run through a shell: "
                                        "quote arguments that contain spaces.")
    env = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), help_text="KEY=value per line")
    workers = forms.IntegerField(min_value=1, max_value=MAX_WORKERS, initial=1, label="Workers")
    gpus_per_worker = forms.IntegerField(min_value=1, max_value=64, initial=1, label="GPUs per worker")
    cpu_per_worker = forms.IntegerField(min_value=1, max_value=512, initial=8, label="CPU cores per worker")
    memory_gib_per_worker = forms.IntegerField(min_value=1, max_value=4096, initial=64, label="Memory per worker (GiB)")
    priority_tier = forms.ModelChoiceField(queryset=PriorityTier.objects.all(), label="Priority tier")
    max_runtime_minutes = forms.IntegerField(min_value=1, max_value=30 * 24 * 60, initial=24 * 60,
                                             label="Maximum run time (minutes)")
    spot_allowed = forms.BooleanField(required=False, label="May run on spot capacity",
                                      help_text=SPOT_WARNING + " Spot hours are billed at the spot rate.")
    topology_level = forms.ChoiceField(required=False, label="Keep workers within one",
                                       help_text="A topology level of the cluster (e.g. a rack): workers placed close "
                                                 "together talk faster.")
    topology_mode = forms.ChoiceField(required=False, choices=Placement.choices, initial=Placement.REQUIRED,
                                      label="Placement", widget=forms.RadioSelect,
                                      help_text="Required: wait until one domain has room. Preferred: one domain "
                                                "if it can, else spread.")
    earliest_cluster = forms.BooleanField(
        required=False, label="Start it on whichever of the team's clusters is likely first",
        help_text="Among the team's flavors like the chosen one (same name, or same GPU model) in any cluster.")
    notify = forms.BooleanField(required=False, initial=True, label="Email me when it ends or is preempted")
    save_as_template = forms.CharField(required=False, max_length=100, label="Save as template (name)")

    def __init__(self, *args, flavors=None, room=None, levels=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["flavor"].queryset = flavors if flavors is not None else GpuFlavor.objects.none()
        self.fields["topology_level"].choices = [("", "— anywhere —")] + [(name, name) for name in levels]
        room = room or {}

        def label(flavor):
            text = f"{flavor.cluster.name} · {flavor.name} ({flavor.resource_name})"
            if flavor.sharing != Sharing.EXCLUSIVE:
                text += f" · {flavor.get_sharing_display()}"
            if flavor.spot:
                text += " · spot"
            if flavor.pk in room:
                limit, free = room[flavor.pk]
                text += f": {free} of {limit} free for the team now"
            return text

        self.fields["flavor"].label_from_instance = label
        self.fields["flavor"].help_text = (
            "Free: what a job can start on now: the team's guaranteed GPUs its jobs do not hold, plus burst as far as "
            "no other team's jobs hold the flavor. Isolation: a time-sliced "
            "share has none (it shares the GPU's memory and takes turns), an MPS share has memory and compute "
            "limits, a MIG slice hardware isolation; a DRA flavor claims whole devices per worker.")
        default_tier = PriorityTier.objects.filter(is_default=True).first()
        if default_tier and not self.initial.get("priority_tier"):
            self.initial["priority_tier"] = default_tier.pk

    def clean_command(self):
        try:
            argv = shlex.split(self.cleaned_data["command"])
        except ValueError as exc:
            raise forms.ValidationError(f"Cannot split the command: {exc}.") from exc
        if not argv:
            raise forms.ValidationError("Give the command to run.")
        return argv

    def clean_env(self):
        env = {}
        for number, line in enumerate(self.cleaned_data.get("env", "").splitlines(), start=1):
            if not line.strip():
                continue
            name, sep, value = line.partition("=")
            name = name.strip()
            if not sep or not ENV_NAME_RE.fullmatch(name):
                raise forms.ValidationError(f"Line {number}: use NAME=value with a valid variable name.")
            env[name] = value
        return env

    def service_fields(self) -> dict:
        data = self.cleaned_data
        return {k: data[k] for k in ("flavor", "name", "image", "command", "env", "workers", "gpus_per_worker",
                                     "cpu_per_worker", "memory_gib_per_worker", "priority_tier",
                                     "max_runtime_minutes", "notify", "spot_allowed", "topology_level",
                                     "topology_mode")}

    def template_values(self) -> dict:
        data = self.data
        return {k: data.get(k, "") for k in ("flavor", "image", "command", "env", "workers", "gpus_per_worker",
                                             "cpu_per_worker", "memory_gib_per_worker", "priority_tier",
                                             "max_runtime_minutes", "spot_allowed", "topology_level",
                                             "topology_mode")}
