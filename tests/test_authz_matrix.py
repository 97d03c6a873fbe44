"""The authorisation matrix: every URL of the portal × every role × its safe and unsafe methods.

The URLs come from the URL conf itself, so a new page or endpoint fails `test_every_url_is_in_the_matrix` until it
is given a row here (or a commented place in ALLOW_LIST). Each row says who may act; everyone else must be
refused: anonymous → 401 (API) or the login page (pages); a role that may not act → 403; another team's user → 404
where the object belongs to a team. Rows act on real objects of a small world built through the services, and
every request runs in a savepoint that is rolled back, so one role's write never changes what the next one sees.
"""

from dataclasses import dataclass, field
from datetime import date, timedelta
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.db import transaction
from django.shortcuts import resolve_url
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.choices import JobState
from jobs.models import Job, JobTemplate
from portal.desired import cluster_desired
from quotas.reservations import reservation_create
from tenants.services import access_token_create
from tests.api.world import World, build_world, token_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "viewer", "member", "team_admin", "outsider", "platform_admin")
TEAM_ROLES = {"viewer", "member", "team_admin", "platform_admin"}  # platform admins act as admins of every team

# URLs outside the matrix, each for a reason.
ALLOW_LIST = {
    "healthz": "liveness probe: answers everyone, reveals nothing",
    "readyz": "readiness probe: answers everyone, reveals only whether dependencies answer",
    "metrics": "Prometheus scrape: counts and health only (METRICS_TOKEN restricts it to the scraper)",
    "login": "the sign-in page itself",
    "logout": "signing out needs no permission",
    "api:schema": "the OpenAPI description is public, like the docs built from it",
    "api:docs": "Swagger UI over the public schema",
    "api:redoc": "Redoc over the public schema",
    "api:not-found": "the JSON 404 for paths under /api/ that name no endpoint",
}
# Whole URL prefixes with their own access control and tests.
ALLOW_PREFIXES = {
    "django-admin/": "Django's admin: staff only, by Django's own login",
    "oidc/": "the single sign-on flow (present only when it is configured)",
}


@dataclass(frozen=True)
class Rule:
    """Who may make this request; `outsider` is what another team's admin gets (404 for team objects)."""

    allowed: frozenset
    outsider: int = 404
    denied: int = 403
    ok: tuple = (200, 201, 204, 302, 400)  # 400: allowed, the payload was refused on its merits

    def expect(self, role: str):
        if role == "outsider" and "outsider" not in self.allowed:
            return self.outsider
        return "ok" if role in self.allowed else self.denied


def rule(*roles, outsider=404, denied=403, ok=None) -> Rule:
    return Rule(frozenset(roles), outsider, denied, ok or Rule.ok)


ANYONE = rule("viewer", "member", "team_admin", "outsider", "platform_admin")
TEAM_READ = rule(*TEAM_ROLES)
TEAM_WRITE = rule("member", "team_admin", "platform_admin")
TEAM_WRITE_CONFLICT = rule("member", "team_admin", "platform_admin", ok=(409,))
TEAM_ADMIN = rule("team_admin", "platform_admin")
PLATFORM = rule("platform_admin", outsider=403)
RESIZERS = rule("team_admin", "outsider", "platform_admin")
PLATFORM_ON_TEAM_OBJECT = rule("platform_admin", outsider=404)  # the object is looked up (scoped) first


@dataclass
class Row:
    kwargs: callable  # world → URL kwargs
    methods: dict  # method → Rule
    data: dict = field(default_factory=dict)  # method → callable(world) → payload
    setup: callable = None  # world → None: extra state this row needs


def team(w: World) -> dict:
    return {"slug": w.team.slug}


def job(w: World) -> dict:
    return {"pk": w.job.pk}


def quota_request(w: World) -> dict:
    return {"pk": w.quota_request.pk}


def none(w: World) -> dict:
    return {}


def month(w: World) -> str:
    return date.today().strftime("%Y-%m")


def _end_job(w: World) -> None:
    Job.objects.filter(pk=w.job.pk).update(state=JobState.CANCELLED)


def _newbie(w: World) -> None:
    UserFactory(username="newbie")


def _workspace(w: World) -> None:
    from tenants.models import PriorityTier
    from workspaces.models import Workspace

    Workspace.objects.create(team=w.team, cluster=w.cluster, flavor=w.flavor, owner=w.member, name="nb",
                             priority_tier=PriorityTier.objects.get(is_default=True), image="jupyter/lab:1",
                             access_hash="sha256:salt:digest", run=w.job)


def workspace(w: World) -> dict:
    from workspaces.models import Workspace

    return {"pk": Workspace.objects.get(name="nb").pk}


def _template(w: World) -> None:
    JobTemplate.objects.create(team=w.team, name="nightly", kind="batch", values={}, created_by=w.member)


def _member_token(w: World) -> None:
    w.token = access_token_create(actor=w.member, name="notebook")[0]


def _submit(w: World) -> dict:
    return {"team": "nlp", "kind": "batch", "name": "matrix", "flavor": "h100", "image": "ghcr.io/acme/eval:1",
            "command": ["python", "eval.py"]}


def _quota_ask(w: World) -> dict:
    return {"team": "nlp", "flavor_id": w.flavor.pk, "guaranteed_units": 1, "justification": "A short experiment"}


def _week_ahead(days: int) -> str:
    return (timezone.now() + timedelta(days=7 + days)).strftime("%Y-%m-%dT%H:00")


def _booking(w: World) -> dict:
    return {"team": "nlp", "flavor": w.flavor.name, "units": 1, "starts_at": _week_ahead(0) + "Z",
            "ends_at": _week_ahead(1) + "Z", "justification": "A short experiment"}


def _reservation(w: World) -> None:
    w.reservation = reservation_create(actor=w.member, team=w.team, flavor=w.flavor, units=1,
                                       starts_at=timezone.now() + timedelta(days=7),
                                       ends_at=timezone.now() + timedelta(days=8), justification="A short experiment")


def reservation(w: World) -> dict:
    return {"pk": w.reservation.pk}


def _namespace_object(w: World) -> dict:
    return {"slug": "nlp", "cluster_name": "east", "group": "core", "version": "v1", "kind": "Namespace",
            "name": "nlp"}


def _cluster_object(w: World) -> dict:
    obj = cluster_desired(cluster=w.cluster)[0]
    group, _, version = obj["apiVersion"].rpartition("/")
    return {"name": "east", "group": group or "core", "version": version, "kind": obj["kind"],
            "object_name": obj["metadata"]["name"]}


MATRIX = {
    # --- API --------------------------------------------------------------------------------------------------
    "api:me": Row(none, {"get": ANYONE}),
    "api:team-list": Row(none, {"get": ANYONE}),
    "api:team-detail": Row(team, {"get": TEAM_READ}),
    "api:member-list": Row(team, {"get": TEAM_READ, "post": TEAM_ADMIN}, setup=_newbie,
                           data={"post": lambda w: {"username": "newbie", "role": "member"}}),
    "api:member-detail": Row(lambda w: {"slug": "nlp", "username": "vic"},
                             {"get": TEAM_READ, "patch": TEAM_ADMIN, "delete": TEAM_ADMIN},
                             data={"patch": lambda w: {"role": "member"}}),
    "api:team-quota-list": Row(team, {"get": TEAM_READ}),
    "api:team-usage": Row(team, {"get": TEAM_READ}),
    "api:team-statement": Row(lambda w: {"slug": "nlp", "month": month(w)}, {"get": TEAM_READ}),
    "api:team-budget": Row(team, {"get": TEAM_READ}),
    "api:cluster-list": Row(none, {"get": ANYONE}),
    "api:cluster-detail": Row(lambda w: {"name": "east"}, {"get": ANYONE}),
    "api:flavor-list": Row(none, {"get": ANYONE}),
    "api:quota-request-list": Row(none, {"get": ANYONE, "post": TEAM_WRITE}, data={"post": _quota_ask}),
    "api:quota-request-detail": Row(quota_request, {"get": TEAM_READ}),
    "api:quota-request-withdraw": Row(quota_request, {"post": TEAM_WRITE}),
    "api:quota-request-impact": Row(quota_request, {"get": PLATFORM_ON_TEAM_OBJECT}),
    "api:quota-request-approve": Row(quota_request, {"post": PLATFORM_ON_TEAM_OBJECT}),
    "api:quota-request-reject": Row(quota_request, {"post": PLATFORM_ON_TEAM_OBJECT},
                                    data={"post": lambda w: {"note": "Not this quarter"}}),
    "api:quota-request-evidence": Row(quota_request, {"get": TEAM_READ}),
    # Team admins see their own teams' rows (another team's admin too: its own); members and viewers are refused.
    "api:rightsizing": Row(none, {"get": RESIZERS}),
    "api:fair-sharing-what-if": Row(lambda w: {"name": "east"}, {"get": PLATFORM}),
    "api:reservation-list": Row(none, {"get": ANYONE, "post": TEAM_WRITE}, data={"post": _booking}),
    "api:reservation-detail": Row(reservation, {"get": TEAM_READ}, setup=_reservation),
    "api:reservation-cancel": Row(reservation, {"post": TEAM_WRITE}, setup=_reservation),
    "api:reservation-approve": Row(reservation, {"post": PLATFORM_ON_TEAM_OBJECT}, setup=_reservation),
    "api:reservation-reject": Row(reservation, {"post": PLATFORM_ON_TEAM_OBJECT}, setup=_reservation,
                                  data={"post": lambda w: {"note": "Not that week"}}),
    "api:calendar": Row(lambda w: {}, {"get": ANYONE}),
    "api:job-list": Row(none, {"get": ANYONE, "post": TEAM_WRITE}, data={"post": _submit}),
    "api:job-detail": Row(job, {"get": TEAM_READ}),
    "api:workspace-list": Row(none, {"get": ANYONE, "post": TEAM_WRITE},
                              data={"post": lambda w: {"team": "nlp", "name": "nb2", "flavor": "h100",
                                                       "image": settings.WORKSPACE_IMAGES["jupyterlab"][0]}}),
    "api:workspace-images": Row(none, {"get": ANYONE}),
    "api:workspace-detail": Row(workspace, {"get": TEAM_READ, "delete": TEAM_WRITE}, setup=_workspace),
    "api:workspace-suspend": Row(workspace, {"post": TEAM_WRITE}, setup=_workspace),
    # Allowed, and refused on its merits: the world's workspace is neither suspended nor warned.
    "api:workspace-resume": Row(workspace, {"post": TEAM_WRITE_CONFLICT}, setup=_workspace),
    "api:workspace-keep": Row(workspace, {"post": TEAM_WRITE_CONFLICT}, setup=_workspace),
    "api:job-cancel": Row(job, {"post": TEAM_WRITE}),
    "api:job-progress": Row(job, {"post": TEAM_WRITE}, data={"post": lambda w: {"done": 10, "total": 100}}),
    "api:job-resubmit": Row(job, {"post": TEAM_WRITE}, setup=_end_job),
    "api:job-yaml": Row(job, {"get": TEAM_READ}),
    "api:job-why-waiting": Row(job, {"get": TEAM_READ}),
    "api:job-sooner": Row(job, {"get": TEAM_READ, "post": TEAM_WRITE},
                          data={"post": lambda w: {"change": {"priority": "no-such-tier"}}}),
    # The world's cluster does not answer, so the allowed roles get the 503 that says so.
    "api:job-logs": Row(job, {"get": rule(*TEAM_ROLES, ok=(503,))}),
    # --- tenants pages ----------------------------------------------------------------------------------------
    "tenants:dashboard": Row(none, {"get": ANYONE}),
    "tenants:team-detail": Row(team, {"get": TEAM_READ}),
    "tenants:membership-add": Row(team, {"post": TEAM_ADMIN}, setup=_newbie,
                                  data={"post": lambda w: {"username": "newbie", "role": "member"}}),
    "tenants:membership-update": Row(team, {"post": TEAM_ADMIN},
                                     data={"post": lambda w: {"username": "vic", "role": "member"}}),
    "tenants:membership-remove": Row(team, {"post": TEAM_ADMIN}, data={"post": lambda w: {"username": "vic"}}),
    "tenants:namespace-retry": Row(lambda w: {"slug": "nlp", "cluster_name": "east"}, {"post": PLATFORM}),
    "tenants:object-detail": Row(_namespace_object, {"get": TEAM_READ}),
    "tenants:object-live": Row(_namespace_object, {"get": TEAM_READ}),
    "tenants:cluster-list": Row(none, {"get": PLATFORM}),
    # Only the connection test: nothing answers on port 9, so the page says so and saves nothing.
    "tenants:cluster-create": Row(none, {"get": PLATFORM, "post": PLATFORM},
                                  data={"post": lambda w: {"name": "north", "scheduler": "kueue",
                                                           "connection": "sandbox", "server": "http://127.0.0.1:9",
                                                           "overcommit": "1.00", "test": "1"}}),
    "tenants:cluster-detail": Row(lambda w: {"name": "east"}, {"get": PLATFORM}),
    "tenants:cluster-retry": Row(lambda w: {"name": "east"}, {"post": PLATFORM}),
    "tenants:cluster-hypernodes": Row(lambda w: {"name": "east"}, {"get": PLATFORM}),
    "tenants:cluster-object-detail": Row(_cluster_object, {"get": PLATFORM}),
    "tenants:cluster-object-live": Row(_cluster_object, {"get": PLATFORM}),
    "tenants:team-list": Row(none, {"get": PLATFORM, "post": PLATFORM}),
    "tenants:team-set-state": Row(team, {"post": PLATFORM}, data={"post": lambda w: {"state": "suspended"}}),
    "tenants:team-delete-namespaces": Row(team, {"post": PLATFORM}),
    "tenants:audit-list": Row(none, {"get": PLATFORM}),
    "console-health": Row(none, {"get": PLATFORM}),
    "tenants:token-list": Row(none, {"get": ANYONE, "post": ANYONE}, data={"post": lambda w: {"name": "ci"}}),
    # A token is its owner's alone: everyone else is told it does not exist.
    "tenants:token-revoke": Row(lambda w: {"pk": w.token.pk}, {"post": rule("member", denied=404)},
                                 setup=_member_token),
    # --- quotas pages -----------------------------------------------------------------------------------------
    "quotas:team-quota": Row(team, {"get": TEAM_READ}),
    # Viewers are refused before they fill the form in, not after.
    "quotas:request-create": Row(team, {"get": TEAM_WRITE, "post": TEAM_WRITE},
                                 data={"post": lambda w: {"flavor": w.flavor.pk, "guaranteed": 1, "burst": 0,
                                                          "justification": "A short experiment"}}),
    "quotas:request-list": Row(none, {"get": ANYONE}),
    "quotas:request-withdraw": Row(quota_request, {"post": TEAM_WRITE}),
    "quotas:approval-list": Row(none, {"get": PLATFORM}),
    "quotas:request-impact": Row(quota_request, {"get": PLATFORM}),
    "quotas:request-decide": Row(lambda w: {"pk": w.quota_request.pk, "decision": "approve"}, {"post": PLATFORM}),
    "quotas:quota-set": Row(lambda w: {"slug": "nlp", "flavor_pk": w.flavor.pk}, {"get": PLATFORM, "post": PLATFORM},
                            data={"post": lambda w: {"guaranteed": 1, "burst": 0, "cpu_cores": 8, "memory_gib": 64,
                                                     "storage_gib": 0}}),
    "quotas:reservation-create": Row(team, {"get": TEAM_READ, "post": TEAM_WRITE},
                                     data={"post": lambda w: {"flavor": w.flavor.pk, "units": 1,
                                                              "starts_at": _week_ahead(0), "ends_at": _week_ahead(1),
                                                              "justification": "A short experiment"}}),
    "quotas:reservation-cancel": Row(reservation, {"post": TEAM_WRITE}, setup=_reservation),
    "quotas:calendar": Row(lambda w: {"flavor_pk": w.flavor.pk}, {"get": ANYONE}),
    "quotas:reservation-approvals": Row(none, {"get": PLATFORM}),
    "quotas:reservation-decide": Row(lambda w: {"pk": w.reservation.pk, "decision": "approve"}, {"post": PLATFORM},
                                     setup=_reservation),
    "quotas:capacity": Row(none, {"get": PLATFORM}),
    "quotas:team-weight": Row(team, {"post": PLATFORM}, data={"post": lambda w: {"weight": "2"}}),
    "quotas:flavor-create": Row(none, {"get": PLATFORM, "post": PLATFORM}),
    "quotas:flavor-edit": Row(lambda w: {"pk": w.flavor.pk}, {"get": PLATFORM, "post": PLATFORM}),
    "quotas:flavor-effect": Row(lambda w: {"pk": w.flavor.pk}, {"get": PLATFORM}),
    "quotas:tier-list": Row(none, {"get": PLATFORM, "post": PLATFORM}),
    # --- jobs pages -------------------------------------------------------------------------------------------
    "jobs:job-list": Row(none, {"get": ANYONE}),
    # Every role's team has a namespace in the world's cluster; each sees its own teams' queues in it.
    "jobs:queue": Row(lambda w: {"cluster_name": w.cluster.name}, {"get": ANYONE}),
    "jobs:job-detail": Row(job, {"get": TEAM_READ}),
    "jobs:job-pods": Row(job, {"get": TEAM_READ}),
    # The world's cluster does not answer, so the allowed roles get the 503 that says so.
    "jobs:job-logs-download": Row(job, {"get": rule(*TEAM_ROLES, ok=(503,))}),
    "jobs:job-sooner": Row(job, {"get": TEAM_READ, "post": TEAM_WRITE},
                           data={"post": lambda w: {"field": "priority", "value": "no-such-tier"}}),
    "jobs:job-action": Row(lambda w: {"pk": w.job.pk, "action": "cancel"}, {"post": TEAM_WRITE}),
    "jobs:job-submit": Row(lambda w: {"slug": "nlp", "kind": "batch"}, {"get": TEAM_WRITE, "post": TEAM_WRITE}),
    "jobs:template-delete": Row(lambda w: {"slug": "nlp", "pk": JobTemplate.objects.get(name="nightly").pk},
                                {"post": TEAM_WRITE}, setup=_template),
    "tenants:team-webhook": Row(team, {"get": TEAM_ADMIN, "post": TEAM_ADMIN},
                                data={"post": lambda w: {"url": "http://127.0.0.1/hook"}}),
    # --- workspaces pages -------------------------------------------------------------------------------------
    "workspaces:workspace-list": Row(none, {"get": ANYONE}),
    "workspaces:workspace-detail": Row(workspace, {"get": TEAM_READ}, setup=_workspace),
    # Owned by the member: the owner and the team's admins may act on it.
    "workspaces:workspace-action": Row(lambda w: {**workspace(w), "action": "suspend"}, {"post": TEAM_WRITE},
                                       setup=_workspace),
    "workspaces:workspace-create": Row(team, {"get": TEAM_WRITE, "post": TEAM_WRITE}),
    # --- billing pages ----------------------------------------------------------------------------------------
    "billing:team-usage": Row(team, {"get": TEAM_READ}),
    "billing:usage-explore": Row(team, {"get": TEAM_READ}),
    "billing:budget-set": Row(team, {"post": TEAM_ADMIN}),
    "billing:allowance-set": Row(team, {"post": PLATFORM_ON_TEAM_OBJECT}),
    "billing:override-grant": Row(team, {"post": PLATFORM_ON_TEAM_OBJECT}),
    "billing:team-statement": Row(lambda w: {"slug": "nlp", "month": month(w)}, {"get": TEAM_READ}),
    "billing:team-statement-export": Row(lambda w: {"slug": "nlp", "month": month(w), "fmt": "csv"},
                                         {"get": TEAM_READ}),
    "billing:request-evidence": Row(quota_request, {"get": TEAM_READ}),
    "billing:rightsizing": Row(none, {"get": RESIZERS}),
    "billing:console-usage": Row(none, {"get": PLATFORM}),
    "billing:console-statements-csv": Row(lambda w: {"month": month(w)}, {"get": PLATFORM}),
    "billing:console-rates": Row(none, {"get": PLATFORM, "post": PLATFORM}),
    "billing:cluster-signal": Row(lambda w: {"name": "east"}, {"get": PLATFORM}),
    "billing:fair-sharing-what-if": Row(lambda w: {"name": "east"}, {"get": PLATFORM}),
    "billing:job-activity": Row(job, {"get": TEAM_READ}),
}


def url_patterns(patterns=None, prefix: str = "", namespace: str | None = None):
    """(route, name) of every URL pattern, walking included URL confs."""
    for pattern in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(pattern, URLResolver):
            inner = pattern.namespace
            ns = f"{namespace}:{inner}" if namespace and inner else inner or namespace
            yield from url_patterns(pattern.url_patterns, prefix + str(pattern.pattern), ns)
        elif isinstance(pattern, URLPattern):
            name = f"{namespace}:{pattern.name}" if namespace and pattern.name else pattern.name
            yield prefix + str(pattern.pattern), name


def covered_names() -> list[str]:
    return sorted({name for route, name in url_patterns()
                   if name not in ALLOW_LIST and not route.startswith(tuple(ALLOW_PREFIXES))})


def test_every_url_is_in_the_matrix():
    unnamed = [route for route, name in url_patterns()
               if name is None and not route.startswith(tuple(ALLOW_PREFIXES))]
    assert not unnamed, f"name these URL patterns so the matrix can cover them: {unnamed}"
    missing = [name for name in covered_names() if name not in MATRIX]
    assert not missing, f"add these URLs to MATRIX (or, with a reason, to ALLOW_LIST): {missing}"


@pytest.fixture(autouse=True)
def _fresh_throttle_counts():
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


def _request(w: World, clients: dict, name: str, method: str, role: str, row: Row):
    """One request as `role`. The two clients are reused: building a client's handler is the costly part."""
    url = reverse(name, kwargs=row.kwargs(w))
    user = None if role == "anonymous" else w.users()[role]
    payload = row.data[method](w) if method in row.data else {}
    if name.startswith("api:"):
        client = clients["api"]
        client.credentials(**({"HTTP_AUTHORIZATION": f"Bearer {token_for(user)}"} if user else {}))
        call = getattr(client, method)
        return url, (call(url, payload, format="json") if method != "get" else call(url))
    client = clients["page"]
    client.logout()
    if user is not None:
        client.force_login(user)
    return url, getattr(client, method)(url, payload)


def _verdict(name: str, response, role: str, rule_: Rule) -> str | None:
    status = response.status_code
    login = resolve_url(settings.LOGIN_URL)
    to_login = status == 302 and urlsplit(response["Location"]).path == login
    if role == "anonymous":
        api = name.startswith("api:")
        good, wanted = (status == 401, "401") if api else (to_login, f"a redirect to {login}")
    elif (expected := rule_.expect(role)) == "ok":
        good, wanted = not to_login and status in rule_.ok, f"one of {rule_.ok}"
    else:
        good, wanted = status == expected, str(expected)
    return None if good else f"{role}: expected {wanted}, got {status}"


@pytest.mark.parametrize(("name", "method"), [(name, method) for name in covered_names() if name in MATRIX
                                               for method in MATRIX[name].methods])
def test_matrix(name, method):
    row = MATRIX[name]
    world = build_world()
    if row.setup:
        row.setup(world)
    failures = []
    clients = {"api": APIClient(), "page": Client()}
    for role in ROLES:
        with transaction.atomic():
            url, response = _request(world, clients, name, method, role, row)
            transaction.set_rollback(True)
        problem = _verdict(name, response, role, row.methods[method])
        if problem:
            failures.append(problem)
    assert not failures, f"{method.upper()} {url}: " + "; ".join(failures)
