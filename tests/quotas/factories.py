import factory

from quotas.models import Quota, QuotaRequest
from tests.factories import GpuFlavorFactory, TeamFactory, UserFactory


class QuotaFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Quota

    team = factory.SubFactory(TeamFactory)
    flavor = factory.SubFactory(GpuFlavorFactory)
    guaranteed = 4
    burst = 2
    cpu_cores = 32
    memory_gib = 256


class QuotaRequestFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QuotaRequest

    team = factory.SubFactory(TeamFactory)
    flavor = factory.SubFactory(GpuFlavorFactory)
    guaranteed = 8
    burst = 4
    cpu_cores = 64
    memory_gib = 512
    justification = "Pre-training run for the Q3 model"
    requested_by = factory.SubFactory(UserFactory)
