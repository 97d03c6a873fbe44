import factory
from django.contrib.auth import get_user_model

from billing.models import ClusterUsageSource
from tenants.choices import Role
from tenants.models import Cluster, GpuFlavor, Membership, PriorityTier, Team, TeamNamespace


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("pw-for-tests-only")


class PlatformAdminFactory(UserFactory):
    is_staff = True
    is_superuser = True


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"cluster-{n}")
    connection = "sandbox"
    server = "http://127.0.0.1:9"  # nothing listens there; tests that talk to a cluster pass a sandbox URL
    scheduler = "kueue"
    cohort = "gpu"
    # Every cluster has its usage source, as registering one through the services gives it: ClusterFactory(
    # usage_source__prometheus_url=url) reads its usage from that Prometheus.
    usage_source = factory.RelatedFactory("tests.factories.ClusterUsageSourceFactory", factory_related_name="cluster")


class ClusterUsageSourceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ClusterUsageSource

    prometheus_url = ""


class GpuFlavorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = GpuFlavor

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"a100-{n}")
    resource_name = "nvidia.com/gpu"
    gpu_model = "NVIDIA A100-SXM4-80GB"
    node_labels = factory.LazyAttribute(lambda f: {"gpu-portal.io/flavor": f.name})
    capacity = 64
    gpus_per_node = 8
    memory_gb = 80


class PriorityTierFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PriorityTier
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"tier-{n}")
    value = factory.Sequence(lambda n: 1000 + n)


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda t: t.slug.replace("-", " ").title())
    cost_center = "CC-100"


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    role = Role.MEMBER


class TeamNamespaceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TeamNamespace

    team = factory.SubFactory(TeamFactory)
    cluster = factory.SubFactory(ClusterFactory)


# --- billing ---------------------------------------------------------------------------------------------------


class UsageHourFactory(factory.django.DjangoModelFactory):
    """One team × flavor × hour of usage; pass `hour` (UTC, on the hour) and the GPU-hours."""

    class Meta:
        model = "billing.UsageHour"

    team = factory.SubFactory(TeamFactory)
    flavor = factory.SubFactory(GpuFlavorFactory)
    cluster = factory.LazyAttribute(lambda u: u.flavor.cluster)
    namespace = factory.LazyAttribute(lambda u: u.team.namespace)
    allocated_gpu_hours = 8
    used_gpu_hours = 4


class JobUsageHourFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "billing.JobUsageHour"

    flavor = factory.LazyAttribute(lambda u: u.job.flavor)
    allocated_gpu_hours = 8
    used_gpu_hours = 0
    utilisation_avg = 0.0


class CollectedHourFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "billing.CollectedHour"

    cluster = factory.SubFactory(ClusterFactory)
    state = "collected"
    collected_at = factory.LazyAttribute(lambda c: c.hour)


class RateCardFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "billing.RateCard"

    flavor = factory.SubFactory(GpuFlavorFactory)
    price_per_gpu_hour = 2


class BudgetFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "billing.Budget"

    team = factory.SubFactory(TeamFactory)
    amount = 1000
