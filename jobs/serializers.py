"""API shapes of jobs. The list serializer reads plain rows (selectors.job_page), not model instances: the job list is
the API's hottest read, and building 50 model objects per page costs more than the query."""

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tenants.models import DNS_LABEL_RE, dns_label

from .choices import SUBMITTED_KINDS, TERMINAL_STATES, JobKind, JobState, Placement
from .models import IMAGE_MESSAGE, IMAGE_RE, MAX_ARGV_ITEMS, MAX_WORKERS


def _whole(regex, message: str) -> RegexValidator:
    """A validator that matches the whole value (`\\Z`, where `$` would let a final newline through); the schema
    shows its pattern."""
    return RegexValidator(rf"\A(?:{regex.pattern.removeprefix('^').removesuffix('$')})\Z", message,
                          flags=regex.flags)


def _iso(value) -> str:
    # Rows come from the database in UTC (USE_TZ): the same text DRF's DateTimeField writes, at a tenth of the cost.
    return value.isoformat().replace("+00:00", "Z")


def _time(value):
    return None if value is None else _iso(value)


def estimate_fields(document: dict) -> dict:
    """A row's estimate as the API shows it: `estimated_start` while the job waits, `expected_end` while it runs
    (null otherwise). A job that cannot start under today's quotas has `cannot_start` and no times."""
    kind = (document or {}).get("kind")
    shown = {"earliest": document.get("earliest"), "likely": document.get("likely"),
             "latest": document.get("latest"), "basis": document.get("basis", {}),
             "sentence": document.get("sentence", "")} if kind else None
    if kind == "never":
        shown["cannot_start"] = True
    elif kind == "start":
        shown["cannot_start"] = False
    return {"estimated_start": shown if kind in ("start", "never") else None,
            "expected_end": shown if kind == "end" else None}


class EstimateSerializer(serializers.Serializer):
    earliest = serializers.DateTimeField(allow_null=True)
    likely = serializers.DateTimeField(allow_null=True)
    latest = serializers.DateTimeField(allow_null=True)
    basis = serializers.DictField(help_text="The facts the estimate rests on: jobs ahead in the queue, the job whose "
                                            "end makes room and what its end rests on (runtime limit, history of "
                                            "comparable runs), jobs it would preempt; or why it cannot start.")
    sentence = serializers.CharField()
    cannot_start = serializers.BooleanField(required=False, help_text="No time: it cannot start under today's "
                                                                      "quotas (estimated_start only).")


@extend_schema_field(EstimateSerializer(allow_null=True))
class EstimateField(serializers.Field):
    """One side of a row's estimate (`estimated_start` or `expected_end`), read from Job.estimate."""

    def __init__(self, side: str, **kwargs):
        self.side = side
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, job):
        return estimate_fields(job.estimate if not job.terminal else {})[self.side]


class EstimateFieldsMixin(serializers.Serializer):
    estimated_start = EstimateField("estimated_start", help_text="While the job waits: when it will likely start "
                                                                 "(ISO 8601 UTC), recomputed as the cluster changes.")
    expected_end = EstimateField("expected_end", help_text="While the job runs: when it will likely end.")


class JobListSerializer(EstimateFieldsMixin):
    id = serializers.IntegerField()
    team = serializers.CharField()
    cluster = serializers.CharField()
    flavor = serializers.CharField()
    kind = serializers.ChoiceField(choices=JobKind.choices)
    name = serializers.CharField()
    image = serializers.CharField()
    state = serializers.ChoiceField(choices=JobState.choices)
    state_message = serializers.CharField()
    terminal = serializers.BooleanField(help_text="The job has ended and will not change any more.")
    workers = serializers.IntegerField()
    gpus_per_worker = serializers.IntegerField()
    gpus = serializers.IntegerField(help_text="workers × gpus_per_worker")
    priority = serializers.CharField()
    submitted_by = serializers.CharField()
    submitted_at = serializers.DateTimeField()
    admitted_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    def to_representation(self, row: dict) -> dict:
        # Field-by-field DRF rendering of a dict row costs more than the query; this builds the same document.
        return {
            "id": row["id"], "team": row["team__slug"], "cluster": row["cluster__name"],
            "flavor": row["flavor__name"], "kind": row["kind"], "name": row["name"], "image": row["image"],
            "state": row["state"], "state_message": row["state_message"],
            "terminal": row["state"] in TERMINAL_STATES, "workers": row["workers"],
            "gpus_per_worker": row["gpus_per_worker"], "gpus": row["workers"] * row["gpus_per_worker"],
            "priority": row["priority_tier__name"], "submitted_by": row["submitted_by__username"],
            "submitted_at": _iso(row["submitted_at"]), "admitted_at": _time(row["admitted_at"]),
            "started_at": _time(row["started_at"]), "finished_at": _time(row["finished_at"]),
            **estimate_fields(row["estimate"] if row["state"] not in TERMINAL_STATES else {}),
        }


MAX_PROGRESS = 2**63 - 1  # the column's range (PositiveBigIntegerField)


class ProgressSerializer(serializers.Serializer):
    """The latest progress the job reported (`progressPercentage` and `lastUpdatedTime` of Kubeflow Trainer's
    TrainJob trainerStatus, with the step counts it came from)."""

    done = serializers.IntegerField()
    total = serializers.IntegerField()
    percentage = serializers.FloatField(help_text="done / total × 100, rounded to a tenth.")
    reported_at = serializers.DateTimeField(help_text="When the latest report came (ISO 8601 UTC).")
    reports = serializers.IntegerField(help_text="Reports of this total so far (the forecast projects from a trend "
                                                 "of two or more, or from a single report past a few percent).")


@extend_schema_field(ProgressSerializer(allow_null=True))
class ProgressField(serializers.Field):
    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, job):
        if job.progress_total is None:
            return None
        return {"done": job.progress_done, "total": job.progress_total,
                "percentage": round(100 * job.progress, 1), "reported_at": _iso(job.progress_at),
                "reports": job.progress_reports}


class JobProgressReportSerializer(serializers.Serializer):
    done = serializers.IntegerField(min_value=0, max_value=MAX_PROGRESS, help_text="Steps (or samples, epochs) done.")
    total = serializers.IntegerField(min_value=1, max_value=MAX_PROGRESS, help_text="Steps in the whole run.")

    def validate(self, attrs):
        if attrs["done"] > attrs["total"]:
            raise serializers.ValidationError({"done": [f"At most total ({attrs['total']})."]})
        return attrs


class JobSerializer(EstimateFieldsMixin):
    id = serializers.IntegerField()
    team = serializers.CharField(source="team.slug")
    cluster = serializers.CharField(source="cluster.name")
    flavor = serializers.CharField(source="flavor.name")
    resource_name = serializers.CharField(source="flavor.resource_name")
    kind = serializers.ChoiceField(choices=JobKind.choices)
    name = serializers.CharField()
    object_name = serializers.CharField(help_text="The name of the job's object in the cluster.")
    namespace = serializers.CharField(source="team.namespace")
    image = serializers.CharField()
    command = serializers.ListField(child=serializers.CharField())
    args = serializers.ListField(child=serializers.CharField())
    env = serializers.DictField(child=serializers.CharField())
    workers = serializers.IntegerField()
    gpus_per_worker = serializers.IntegerField()
    gpus = serializers.IntegerField(source="total_gpus")
    cpu_per_worker = serializers.IntegerField(help_text="CPU cores per worker")
    memory_gib_per_worker = serializers.IntegerField()
    max_runtime_minutes = serializers.IntegerField()
    priority = serializers.CharField(source="priority_tier.name")
    notify = serializers.BooleanField()
    state = serializers.ChoiceField(choices=JobState.choices)
    state_message = serializers.CharField()
    terminal = serializers.BooleanField()
    sync_state = serializers.CharField(help_text="Whether the job's objects are applied: applied, pending, "
                                                 "retrying or rejected.")
    sync_message = serializers.CharField()
    submitted_by = serializers.CharField(source="submitted_by.username")
    submitted_at = serializers.DateTimeField()
    admitted_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    cancel_requested_at = serializers.DateTimeField(allow_null=True)
    queue_wait_seconds = serializers.FloatField(allow_null=True)
    run_seconds = serializers.FloatField(allow_null=True)
    resubmit_of = serializers.IntegerField(source="resubmit_of_id", allow_null=True)
    spot_allowed = serializers.BooleanField()
    topology_level = serializers.CharField()
    topology_mode = serializers.CharField()
    placement = serializers.DictField(help_text="Where the cluster placed the job and why: flavor, spot, "
                                                "topology domain, eviction.")
    progress = ProgressField(help_text="The latest progress the job's own code reported; null before any.")


class JobSubmitSerializer(serializers.Serializer):
    """The rules the model enforces on each value, stated here so the schema shows them (the service checks them
    again, with what depends on stored data: the flavor, tier and quota, exactly as for the form)."""

    team = serializers.SlugField(max_length=63, required=False,
                                 help_text="The team's slug; may be left out by someone who submits for one team only.")
    kind = serializers.ChoiceField(choices=[(k.value, k.label) for k in SUBMITTED_KINDS])
    name = serializers.CharField(max_length=40, validators=[_whole(DNS_LABEL_RE, dns_label.message)],
                                 trim_whitespace=False,
                                 help_text="Lowercase letters, digits and '-', starting and ending with a letter or "
                                           "digit.")
    flavor = serializers.CharField(max_length=63, help_text="The GPU flavor's name.")
    cluster = serializers.CharField(max_length=63, required=False,
                                    help_text="The cluster's name, when flavors of that name exist in several.")
    image = serializers.CharField(max_length=300, trim_whitespace=False,
                                  validators=[_whole(IMAGE_RE, IMAGE_MESSAGE)],
                                  help_text="An image reference: [registry[:port]/]path[:tag][@sha256:digest].")
    command = serializers.ListField(child=serializers.CharField(max_length=4096, trim_whitespace=False),
                                    min_length=1, max_length=MAX_ARGV_ITEMS,
                                    help_text="The command as a list of arguments; nothing runs through a shell.")
    args = serializers.ListField(child=serializers.CharField(max_length=4096, trim_whitespace=False),
                                 required=False, default=list, max_length=MAX_ARGV_ITEMS)
    env = serializers.DictField(child=serializers.CharField(max_length=4096, allow_blank=True,
                                                            trim_whitespace=False), required=False, default=dict,
                                help_text="Variable names are letters, digits and '_', not starting with a digit.")
    workers = serializers.IntegerField(min_value=1, max_value=MAX_WORKERS, default=1)
    gpus_per_worker = serializers.IntegerField(min_value=1, max_value=64, default=1)
    cpu_per_worker = serializers.IntegerField(min_value=1, max_value=512, default=8)
    memory_gib_per_worker = serializers.IntegerField(min_value=1, max_value=4096, default=64)
    priority = serializers.CharField(max_length=50, required=False,
                                     help_text="A priority tier's name; the platform's default when left out.")
    max_runtime_minutes = serializers.IntegerField(min_value=1, max_value=30 * 24 * 60, default=24 * 60)
    notify = serializers.BooleanField(default=True, help_text="Email the submitter when the job ends.")
    spot_allowed = serializers.BooleanField(default=False, help_text="May run on the cluster's spot flavors when "
                                                                     "reserved capacity is full; spot can be evicted.")
    topology_level = serializers.CharField(max_length=63, required=False, default="", allow_blank=True,
                                           help_text="Keep every worker within one domain of this topology level "
                                                     "of the cluster (e.g. rack).")
    topology_mode = serializers.ChoiceField(choices=Placement.choices, required=False, default="", allow_blank=True,
                                            help_text="required (wait for one domain) or preferred; required when "
                                                      "left out with a level.")
    earliest_cluster = serializers.BooleanField(
        default=False, help_text="Place the job on whichever of the team's clusters holding a flavor like `flavor` "
                                 "(same name, or same GPU model) would likely start it first.")


class JobYamlSerializer(serializers.Serializer):
    yaml = serializers.CharField(help_text="The objects the portal applies for this job, as YAML documents.")


class QueuedJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    submitted_by = serializers.CharField(source="submitted_by.username")
    submitted_at = serializers.DateTimeField()
    gpus = serializers.IntegerField(source="total_gpus")


class WhyWaitingSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=JobState.choices)
    message = serializers.CharField(help_text="Empty once the job is no longer waiting.")
    ahead = QueuedJobSerializer(many=True, help_text="The team's jobs queued before this one.")


class PodLogSerializer(serializers.Serializer):
    name = serializers.CharField()
    phase = serializers.CharField()
    log = serializers.CharField(help_text="The last lines of the pod's log.")


class JobLogsSerializer(serializers.Serializer):
    pods = PodLogSerializer(many=True)


class ChangeSerializer(serializers.Serializer):
    workers = serializers.IntegerField(min_value=1, max_value=MAX_WORKERS, required=False)
    gpus_per_worker = serializers.IntegerField(min_value=1, max_value=64, required=False)
    flavor = serializers.IntegerField(required=False, help_text="The id of a flavor the team holds quota of.")
    priority = serializers.CharField(max_length=50, required=False, help_text="A higher priority tier's name.")


class AlternativeSerializer(serializers.Serializer):
    label = serializers.CharField(help_text="The change in words: \"2 workers instead of 4\", \"on h100 in west\".")
    change = ChangeSerializer(help_text="POST it back (as `change`) to resubmit the job with it.")
    estimated_start = EstimateSerializer(allow_null=True)
    sooner = serializers.BooleanField(help_text="It would likely start before the job as it is.")

    def to_representation(self, item):
        return {"label": item["label"], "change": item["change"],
                "estimated_start": estimate_fields(item["estimate"])["estimated_start"], "sooner": item["sooner"]}


class SoonerSerializer(serializers.Serializer):
    estimated_start = EstimateSerializer(allow_null=True, help_text="The job as it is.")
    alternatives = AlternativeSerializer(many=True, help_text="Soonest first; empty once the job no longer waits.")


class SoonerRequestSerializer(serializers.Serializer):
    change = ChangeSerializer(help_text="One of the alternatives' `change`, as GET listed it.")
