import factory
from django.contrib.auth import get_user_model

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

    name = factory.Sequence(lambda n: f"cluster-{n}")
    connection = "sandbox"
    server = "http://127.0.0.1:9"  # nothing listens there; tests that talk to a cluster pass a sandbox URL
    scheduler = "kueue"
    cohort = "gpu"


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
