"""The API server's pod-spec rules beyond containers (scheduling constraints, volumes), one test per rule.

Rules: Kubernetes pkg/apis/core/validation/validation.go (function cited per test); each test refuses an
invalid fixture with the API server's wording and accepts the valid one, as a Pod or as a Job's template.
"""

from sandbox.tests.test_admission_core import _job, _messages


def _pod(name="p", mounts=None, **spec):
    container = {"name": "main", "image": "trainer:2", **({"volumeMounts": mounts} if mounts else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [container], **spec}}


def _template_job(name="train", **pod):
    job = _job(name)
    job["spec"]["template"]["spec"].update(pod)
    return job


def test_node_selector_keys_and_values_are_labels(objects):
    # ValidatePodSpec -> ValidateLabels(spec.NodeSelector): keys qualified names, values label values.
    error = objects.refused(_template_job(nodeSelector={"gpu/type/x": "a100", "pool": "spot pool"}))
    assert error.code == 422
    assert _messages(error) == [
        'spec.template.spec.nodeSelector: Invalid value: "gpu/type/x": a qualified name must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
        "'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an "
        "optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        'spec.template.spec.nodeSelector: Invalid value: "spot pool": a valid label must be an empty string or '
        "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]
    objects.create(_template_job("ok", nodeSelector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
                   dry_run=True)


def test_toleration_operator_and_effect(objects):
    # ValidateTolerations: empty key needs Exists, Exists has no value, operator and effect from fixed sets,
    # tolerationSeconds only with NoExecute (validateTaintEffect).
    error = objects.refused(_template_job(tolerations=[
        {"operator": "Equal", "value": "x"},
        {"key": "spot", "operator": "Exists", "value": "true", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Matches", "effect": "Sometimes"},
        {"key": "spot", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}]))
    assert error.code == 422
    assert _messages(error) == [
        'spec.template.spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is '
        'empty, which means "match all values and all keys"',
        'spec.template.spec.tolerations[1].operator: Invalid value: "true": value must be empty when `operator` '
        "is 'Exists'",
        'spec.template.spec.tolerations[2].operator: Unsupported value: "Matches": supported values: "Equal", '
        '"Exists"',
        'spec.template.spec.tolerations[2].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"',
        'spec.template.spec.tolerations[3].effect: Invalid value: "NoSchedule": effect must be \'NoExecute\' when '
        "`tolerationSeconds` is set"]
    objects.create(_template_job("ok", tolerations=[
        {"operator": "Exists"}, {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true",
                                 "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}]), dry_run=True)


def test_toleration_value_is_a_label_value(objects):
    # ValidateTolerations: an Equal (or empty) operator's value is a label value, errors joined by ";".
    error = objects.refused(_pod(tolerations=[{"key": "spot", "value": "-yes"}]))
    assert _messages(error) == [
        'spec.tolerations[0].operator: Invalid value: "-yes": a valid label must be an empty string or consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
        "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]
    objects.create(_pod("ok", tolerations=[{"key": "spot", "value": "yes"}]), dry_run=True)


def test_required_node_affinity_terms(objects):
    # validateNodeAffinity -> ValidateNodeSelector / ValidateNodeSelectorTerm / ValidateNodeSelectorRequirement.
    def required(*terms):
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}

    assert _messages(objects.refused(_template_job(affinity=required()))) == [
        "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: "
        "Required value: must have at least one node selector term"]
    error = objects.refused(_template_job(affinity=required({"matchExpressions": [
        {"key": "zone", "operator": "In"}, {"key": "spot", "operator": "Exists", "values": ["x"]},
        {"key": "gpus", "operator": "Gt", "values": ["1", "2"]}, {"key": "zone", "operator": "Near"}],
        "matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["n1"]}]})))
    prefix = ("spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
              "nodeSelectorTerms[0]")
    assert _messages(error) == [
        f"{prefix}.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        f"{prefix}.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or "
        "'DoesNotExist'",
        f"{prefix}.matchExpressions[2].values: Required value: must be specified single value when `operator` is "
        "'Lt' or 'Gt'",
        f'{prefix}.matchExpressions[3].operator: Invalid value: "Near": not a valid selector operator',
        f'{prefix}.matchFields[0].key: Invalid value: "metadata.uid": not a valid field selector key']
    objects.create(_template_job("ok", affinity=required({"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a"]}, {"key": "gpus", "operator": "Gt", "values": ["1"]}],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]})), dry_run=True)


def test_required_affinity_checks_label_values_preferred_does_not(objects):
    # ValidateNodeSelectorRequirement checks values for required terms; ValidatePreferredSchedulingTerms allows
    # invalid values ("they can succeed when the cluster has only one node") but bounds the weight to 1-100.
    bad = [{"key": "zone", "operator": "In", "values": ["not valid"]}]
    error = objects.refused(_pod(affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": bad}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 101, "preference": {"matchExpressions": bad}}],
    }}))
    messages = _messages(error)
    assert len(messages) == 2
    assert messages[0].startswith(
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]."
        'matchExpressions[0].values[0]: Invalid value: "not valid": a valid label must be an empty string')
    assert messages[1] == ("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
                           "Invalid value: 101: must be in the range 1-100")
    objects.create(_pod("ok", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": bad}}]}}), dry_run=True)


def test_volumes_have_unique_label_names_and_one_source(objects):
    # ValidateVolumes (name required, DNS-1123 label, unique) and validateVolumeSource (exactly one source).
    error = objects.refused(_template_job(volumes=[
        {"name": "shm", "emptyDir": {"medium": "Memory"}}, {"name": "shm", "emptyDir": {}},
        {"name": "Data", "emptyDir": {}}, {"name": "none"},
        {"name": "two", "emptyDir": {}, "configMap": {"name": "c"}}]))
    path = "spec.template.spec.volumes"
    assert _messages(error) == [
        f'{path}[1].name: Duplicate value: "shm"',
        f'{path}[2].name: Invalid value: "Data": a lowercase RFC 1123 label must consist of lower case alphanumeric '
        "characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        f"{path}[3]: Required value: must specify a volume type",
        f"{path}[4].configMap: Forbidden: may not specify more than 1 volume type"]
    objects.create(_template_job("ok", volumes=[{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
                                                {"name": "cfg", "configMap": {"name": "c"}}]), dry_run=True)


def test_empty_dir_size_limit_is_not_negative(objects):
    # validateVolumeSource: a negative emptyDir sizeLimit is forbidden.
    error = objects.refused(_pod(volumes=[{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "-1Gi"}}]))
    assert _messages(error) == [
        "spec.volumes[0].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity"]
    objects.create(_pod("ok", volumes=[{"name": "shm", "emptyDir": {"sizeLimit": "0"}}]), dry_run=True)


def test_volume_mounts_name_a_volume_and_unique_paths(objects):
    # validateVolumeMounts: the volume exists (NotFound), mountPath required and unique within the container.
    error = objects.refused(_template_job(volumes=[{"name": "shm", "emptyDir": {"medium": "Memory"}}], containers=[
        {"name": "main", "image": "trainer:2", "volumeMounts": [
            {"name": "shm", "mountPath": "/dev/shm"}, {"name": "data", "mountPath": "/dev/shm"},
            {"name": "shm", "mountPath": ""}]}]))
    path = "spec.template.spec.containers[0].volumeMounts"
    assert _messages(error) == [
        f'{path}[1].name: Not found: "data"',
        f'{path}[1].mountPath: Invalid value: "/dev/shm": must be unique',
        f"{path}[2].mountPath: Required value"]
    objects.create(_pod("ok", mounts=[{"name": "shm", "mountPath": "/dev/shm"}],
                        volumes=[{"name": "shm", "emptyDir": {"medium": "Memory"}}]), dry_run=True)


def test_container_claims_name_the_pods_resource_claims(objects):
    # validatePodResourceClaims (one source per claim) and validateResourceClaimNames (each container claim names a
    # pod claim, once), with its "must be one of the names in pod.spec.resourceClaims" detail.
    claims = [{"name": "gpus", "resourceClaimTemplateName": "train-gpus"}, {"name": "nic"}]
    pod = _pod(resourceClaims=claims)
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}, {"name": "gpus"}, {"name": "gpu"}]}
    error = objects.refused(pod)
    assert error.code == 422
    assert _messages(error) == [
        'spec.resourceClaims[1]: Invalid value: "object": must specify one of: `resourceClaimName`, '
        "`resourceClaimTemplateName`",
        'spec.containers[0].resources.claims[1]: Duplicate value: "gpus"',
        'spec.containers[0].resources.claims[2]: Not found: "gpu": must be one of the names in '
        "pod.spec.resourceClaims: gpus, nic"]
    unclaimed = _pod("unclaimed")
    unclaimed["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}]}
    assert _messages(objects.refused(unclaimed)) == [
        'spec.containers[0].resources.claims[0]: Not found: "gpus": must be one of the names in '
        "pod.spec.resourceClaims which is empty"]
    ok = _pod("ok", resourceClaims=claims[:1])
    ok["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}]}
    objects.create(ok, dry_run=True)
