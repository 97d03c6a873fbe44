"""One small tenancy for the API tests and the authorisation matrix: two teams in one cluster, a user in every
role, a quota, a pending quota request and a job of each team, each made through the services."""

from dataclasses import dataclass

from jobs.models import Job
from jobs.services import job_submit
from quotas.models import Quota, QuotaRequest
from quotas.services import quota_request_create
from tenants.choices import Role
from tenants.models import Cluster, GpuFlavor, Team
from tenants.services import access_token_create
from tests.factories import (
    ClusterFactory,
    GpuFlavorFactory,
    MembershipFactory,
    PlatformAdminFactory,
    PriorityTierFactory,
    TeamFactory,
    TeamNamespaceFactory,
    UserFactory,
)
from tests.quotas.factories import QuotaFactory


@dataclass
class World:
    cluster: Cluster
    flavor: GpuFlavor
    team: Team
    other_team: Team
    admin: object  # team admin of `team`
    member: object
    viewer: object
    outsider: object  # admin of `other_team` only
    platform_admin: object
    quota: Quota
    quota_request: QuotaRequest
    job: Job
    other_job: Job

    def users(self) -> dict:
        return {"viewer": self.viewer, "member": self.member, "team_admin": self.admin, "outsider": self.outsider,
                "platform_admin": self.platform_admin}


def build_world() -> World:
    cluster = ClusterFactory(name="east")
    flavor = GpuFlavorFactory(cluster=cluster, name="h100", gpu_model="NVIDIA H100", capacity=64)
    PriorityTierFactory(name="standard", value=1000, is_default=True)
    team = TeamFactory(slug="nlp", name="Natural Language")
    other_team = TeamFactory(slug="vision", name="Vision")
    for t in (team, other_team):
        TeamNamespaceFactory(team=t, cluster=cluster)
    admin = MembershipFactory(team=team, user=UserFactory(username="ada"), role=Role.ADMIN).user
    member = MembershipFactory(team=team, user=UserFactory(username="erin"), role=Role.MEMBER).user
    viewer = MembershipFactory(team=team, user=UserFactory(username="vic"), role=Role.VIEWER).user
    outsider = MembershipFactory(team=other_team, user=UserFactory(username="otto"), role=Role.ADMIN).user
    platform_admin = PlatformAdminFactory(username="root")
    quota = QuotaFactory(team=team, flavor=flavor, guaranteed=8, burst=4)
    QuotaFactory(team=other_team, flavor=flavor, guaranteed=8, burst=0)
    quota_request = quota_request_create(actor=member, team=team, flavor=flavor, guaranteed=16, burst=4,
                                         justification="Pre-training run for the next model")
    job = job_submit(actor=member, team=team, flavor=flavor, kind="pytorch", name="train", image="ghcr.io/acme/train:1",
                     command=["torchrun", "train.py"], workers=2, gpus_per_worker=4)
    other_job = job_submit(actor=outsider, team=other_team, flavor=flavor, kind="batch", name="eval",
                           image="ghcr.io/acme/eval:1", command=["python", "eval.py"])
    return World(cluster=cluster, flavor=flavor, team=team, other_team=other_team, admin=admin, member=member,
                 viewer=viewer, outsider=outsider, platform_admin=platform_admin, quota=quota,
                 quota_request=quota_request, job=job, other_job=other_job)


def token_for(user, name: str = "tests") -> str:
    return access_token_create(actor=user, name=name)[1]
