"""Pure builders for a team's namespace and access objects, and the cluster-wide priority classes.

Values in, plain dicts out, deterministic names. No database, settings, network or clock.
"""

from dataclasses import dataclass

from portal.naming import cluster_labels, dns_name, team_labels

EDIT_BINDING = "gpu-portal-edit"
VIEW_BINDING = "gpu-portal-view"
RBAC_GROUP = "rbac.authorization.k8s.io"
KUBE_DNS = {"k8s-app": "kube-dns"}


@dataclass(frozen=True)
class TeamSpec:
    """What the builders need to know about a team in one cluster."""

    slug: str
    namespace: str
    idp_group: str = ""
    editors: tuple[str, ...] = ()  # usernames of team admins and members
    viewers: tuple[str, ...] = ()
    monitoring_namespace: str = "monitoring"


def namespace_manifest(team: TeamSpec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": team.namespace, "labels": team_labels(team.slug)},
    }


def _user(name: str) -> dict:
    return {"kind": "User", "apiGroup": RBAC_GROUP, "name": name}


def role_binding_manifest(team: TeamSpec, *, name: str, cluster_role: str, subjects: list[dict]) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": team.namespace, "labels": team_labels(team.slug)},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": cluster_role},
        "subjects": subjects,
    }


def role_binding_manifests(team: TeamSpec) -> list[dict]:
    """Admins and members edit, viewers view; the identity-provider group, when set, edits too."""
    editors = ([{"kind": "Group", "apiGroup": RBAC_GROUP, "name": team.idp_group}] if team.idp_group else [])
    editors += [_user(u) for u in sorted(team.editors)]
    viewers = [_user(u) for u in sorted(team.viewers)]
    bindings = []
    if editors:
        bindings.append(role_binding_manifest(team, name=EDIT_BINDING, cluster_role="edit", subjects=editors))
    if viewers:
        bindings.append(role_binding_manifest(team, name=VIEW_BINDING, cluster_role="view", subjects=viewers))
    return bindings


def _network_policy(team: TeamSpec, name: str, spec: dict) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": team.namespace, "labels": team_labels(team.slug)},
        "spec": spec,
    }


def _namespace_peer(name: str) -> dict:
    # API defaulting labels every namespace with its own name, so this selects exactly one namespace.
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}


def network_policy_manifests(team: TeamSpec) -> list[dict]:
    """Default deny, then: traffic inside the namespace (rendezvous between workers), DNS, metrics scraping."""
    everything = {"podSelector": {}}
    return [
        _network_policy(team, "default-deny-all", {**everything, "policyTypes": ["Ingress", "Egress"]}),
        _network_policy(
            team,
            "allow-same-namespace",
            {
                **everything,
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [{"podSelector": {}}]}],
                "egress": [{"to": [{"podSelector": {}}]}],
            },
        ),
        _network_policy(
            team,
            "allow-dns-egress",
            {
                **everything,
                "policyTypes": ["Egress"],
                "egress": [
                    {
                        "to": [{**_namespace_peer("kube-system"), "podSelector": {"matchLabels": KUBE_DNS}}],
                        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                    }
                ],
            },
        ),
        _network_policy(
            team,
            "allow-metrics-scrape",
            {
                **everything,
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [_namespace_peer(team.monitoring_namespace)]}],
            },
        ),
    ]


def team_access_manifests(team: TeamSpec, *, access: bool = True) -> list[dict]:
    """Namespace, network policies and (unless access is withdrawn, e.g. a suspended team) role bindings."""
    objects = [namespace_manifest(team)]
    if access:
        objects += role_binding_manifests(team)
    return objects + network_policy_manifests(team)


@dataclass(frozen=True)
class TierSpec:
    name: str
    value: int
    preemption_policy: str
    description: str = ""


def priority_class_name(tier_name: str) -> str:
    return dns_name("gpu-portal", tier_name)


def priority_class_manifest(tier: TierSpec) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": priority_class_name(tier.name), "labels": cluster_labels()},
        "value": tier.value,
        "globalDefault": False,
        "preemptionPolicy": tier.preemption_policy,
        "description": tier.description or f"GPU portal priority tier {tier.name}",
    }
