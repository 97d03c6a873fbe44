from rest_framework import serializers

from jobs.models import IMAGE_MESSAGE, IMAGE_RE
from tenants.models import DNS_LABEL_RE

from . import selectors
from .choices import Stage, Tool


class WorkspaceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(source="team.slug")
    cluster = serializers.CharField(source="cluster.name")
    flavor = serializers.CharField(source="flavor.name")
    name = serializers.CharField()
    tool = serializers.ChoiceField(choices=Tool.choices)
    image = serializers.CharField()
    gpus = serializers.IntegerField()
    cpu = serializers.IntegerField()
    memory_gib = serializers.IntegerField()
    volume_gib = serializers.IntegerField()
    volume = serializers.CharField(source="volume_name", help_text="Its home PersistentVolumeClaim.")
    volume_deleted = serializers.SerializerMethodField()
    priority = serializers.CharField(source="priority_tier.name")
    owner = serializers.CharField(source="owner.username")
    stage = serializers.ChoiceField(choices=Stage.choices, help_text="active, warned (idle), suspended or deleted.")
    run = serializers.IntegerField(source="run_id", allow_null=True, help_text="The job that serves it now.")
    run_state = serializers.SerializerMethodField()
    why_waiting = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField(help_text="Where to open it (localhost after the port-forward).")
    port_forward = serializers.SerializerMethodField(help_text="The kubectl command, where there is no host.")
    activity = serializers.DictField(help_text="The last reading of its GPUs and the idle rule's verdict.")
    created_at = serializers.DateTimeField()
    warned_at = serializers.DateTimeField(allow_null=True)
    keep_until = serializers.DateTimeField(allow_null=True)
    suspended_at = serializers.DateTimeField(allow_null=True)

    def get_volume_deleted(self, workspace) -> bool:
        return workspace.volume_deleted_at is not None

    def get_run_state(self, workspace) -> str | None:
        return workspace.run.state if workspace.run is not None and workspace.live else None

    def get_why_waiting(self, workspace) -> str:
        return selectors.why_waiting(workspace) if workspace.live else ""

    def get_url(self, workspace) -> str:
        return selectors.way_in(workspace)["url"] if workspace.live else ""

    def get_port_forward(self, workspace) -> str:
        return selectors.way_in(workspace)["port_forward"] if workspace.live else ""


class WorkspaceCreatedSerializer(WorkspaceSerializer):
    access_token = serializers.CharField(help_text="Shown only in this answer: the portal keeps only its hash.")


class WorkspaceCreateSerializer(serializers.Serializer):
    team = serializers.SlugField(max_length=63, required=False,
                                 help_text="The team's slug; may be left out by a member of one team only.")
    name = serializers.RegexField(rf"^(?:{DNS_LABEL_RE.pattern})\Z", max_length=40,
                                  error_messages={"invalid": "Lowercase letters, digits and '-'."})
    tool = serializers.ChoiceField(choices=Tool.choices, default=Tool.JUPYTERLAB)
    image = serializers.RegexField(rf"^(?:{IMAGE_RE.pattern})\Z", max_length=300,
                                   error_messages={"invalid": IMAGE_MESSAGE},
                                   help_text="One of the platform's images for the tool (GET /workspaces/images/).")
    flavor = serializers.CharField(max_length=63)
    cluster = serializers.CharField(max_length=63, required=False)
    gpus = serializers.IntegerField(min_value=1, max_value=64, default=1)
    cpu = serializers.IntegerField(min_value=1, max_value=512, default=4)
    memory_gib = serializers.IntegerField(min_value=1, max_value=4096, default=32)
    volume_gib = serializers.IntegerField(min_value=1, max_value=10240, default=50)
    priority = serializers.CharField(max_length=63, required=False)
