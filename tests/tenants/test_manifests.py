import pytest

from tenants.manifests import (
    TeamSpec,
    TierSpec,
    namespace_manifest,
    network_policy_manifests,
    priority_class_manifest,
    role_binding_manifests,
    team_access_manifests,
)

LABELS = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "nlp"}
RBAC = "rbac.authorization.k8s.io"


def binding(name, role, subjects):
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": "nlp", "labels": LABELS},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    }


def user(name):
    return {"kind": "User", "apiGroup": RBAC, "name": name}


@pytest.mark.parametrize(
    ("team", "expected"),
    [
        (TeamSpec(slug="nlp", namespace="nlp"), []),
        (
            TeamSpec(slug="nlp", namespace="nlp", editors=("erin", "dave"), viewers=("zoe",)),
            [
                binding("gpu-portal-edit", "edit", [user("dave"), user("erin")]),
                binding("gpu-portal-view", "view", [user("zoe")]),
            ],
        ),
        (
            TeamSpec(slug="nlp", namespace="nlp", idp_group="oidc:nlp"),
            [binding("gpu-portal-edit", "edit", [{"kind": "Group", "apiGroup": RBAC, "name": "oidc:nlp"}])],
        ),
        (
            TeamSpec(slug="nlp", namespace="nlp", viewers=("zoe",)),
            [binding("gpu-portal-view", "view", [user("zoe")])],
        ),
    ],
)
def test_role_bindings(team, expected):
    assert role_binding_manifests(team) == expected


def test_namespace():
    assert namespace_manifest(TeamSpec(slug="nlp", namespace="team-nlp")) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-nlp", "labels": LABELS},
    }


def test_network_policies_start_with_default_deny_and_open_only_what_teams_need():
    policies = network_policy_manifests(TeamSpec(slug="nlp", namespace="nlp", monitoring_namespace="mon"))
    assert [p["metadata"]["name"] for p in policies] == [
        "default-deny-all", "allow-same-namespace", "allow-dns-egress", "allow-metrics-scrape"
    ]
    assert policies[0] == {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny-all", "namespace": "nlp", "labels": LABELS},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
    }
    scrape = policies[3]["spec"]["ingress"][0]["from"][0]
    assert scrape == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}}}
    dns = policies[2]["spec"]["egress"][0]
    assert {p["port"] for p in dns["ports"]} == {53}


def test_suspended_team_keeps_namespace_and_policies_but_loses_access():
    team = TeamSpec(slug="nlp", namespace="nlp", editors=("dave",))
    kinds = [o["kind"] for o in team_access_manifests(team, access=False)]
    assert "RoleBinding" not in kinds and kinds[0] == "Namespace" and kinds.count("NetworkPolicy") == 4


def test_priority_class():
    tier = TierSpec(name="urgent", value=100000, preemption_policy="PreemptLowerPriority", description="Deadlines")
    assert priority_class_manifest(tier) == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {
            "name": "gpu-portal-urgent",
            "labels": {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/scope": "cluster"},
        },
        "value": 100000,
        "globalDefault": False,
        "preemptionPolicy": "PreemptLowerPriority",
        "description": "Deadlines",
    }


def test_every_generated_object_is_valid_against_the_kubernetes_schemas():
    from sandbox.validation import Validator

    team = TeamSpec(slug="nlp", namespace="nlp", idp_group="g", editors=("a",), viewers=("b",))
    objects = team_access_manifests(team) + [
        priority_class_manifest(TierSpec(name="low", value=1, preemption_policy="Never"))
    ]
    validator = Validator()
    for obj in objects:
        assert validator.validate(obj, strict=True) == [], obj["metadata"]["name"]
