"""The upstream releases the portal is written against, and the API versions it speaks to them in: one table.

A rule taken from an upstream system names the file it comes from (`kueue pkg/scheduler/...`, `volcano
pkg/webhooks/...`): the file at the release below, which is spelled here rather than in every comment; moving to a
newer release starts here. The CRDs of these
releases are the data the custom objects are validated against in the tests.
"""

KUBERNETES = "v1.34"
KUEUE = "v0.19.2"
VOLCANO = "v1.15.1"
KUBERAY = "v1.7.0"

# The releases the controllers lane builds and runs (tools/controllers: the module proxy serves no Volcano v1.15 API
# module and no KubeRay v1.7.0 source; UPSTREAM.md says what differs from the releases above).
KUEUE_BUILT = KUEUE
VOLCANO_BUILT = "v1.14.1"
KUBERAY_BUILT = "v1.6.2"

# The one spelling of each scheduler API version the portal writes and reads.
KUEUE_API = "kueue.x-k8s.io/v1beta2"
VOLCANO_SCHEDULING_API = "scheduling.volcano.sh/v1beta1"
VOLCANO_BATCH_API = "batch.volcano.sh/v1alpha1"
VOLCANO_TOPOLOGY_API = "topology.volcano.sh/v1alpha1"
RAY_API = "ray.io/v1"

RELEASES = {"Kubernetes": KUBERNETES, "Kueue": KUEUE, "Volcano": VOLCANO, "KubeRay": KUBERAY}
