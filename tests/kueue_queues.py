"""Reading a ClusterQueue the portal wrote: its one resource group lists a flavor per GPU flavor, each with every
covered resource (`backends.kueue_manifests.cluster_queue_manifest`)."""


def flavor_quota(queue: dict, flavor: str, resource: str) -> dict:
    """The flavor's entry for `resource` ({"name", "nominalQuota"[, "borrowingLimit"]})."""
    for group in queue["spec"]["resourceGroups"]:
        for entry in group["flavors"]:
            if entry["name"] == flavor:
                return next(r for r in entry["resources"] if r["name"] == resource)
    raise KeyError(f"{flavor} / {resource} not in ClusterQueue {queue['metadata']['name']}")
