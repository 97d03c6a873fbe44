"""Admission as a cluster with Kueue, Volcano and KubeRay installed does it, on create, update, patch and apply
(dry-run included), in kube-apiserver's order: defaulting and mutating admission, then schema validation (the
store's), then the API server's own validation of core kinds (`core`) and the validating webhooks.

The webhooks of a controller apply only to the kinds the sandbox serves, so they are there exactly when its CRDs are
(Kueue's job webhooks when Kueue's ClusterQueue kind is served). `after_commit` runs the small controllers a real
cluster has that make admission meaningful: ResourceQuota status, Volcano's queue state, Kueue's finalizers.
"""

from __future__ import annotations

from functools import partial

from .. import errors
from . import core, kuberay, kueue, kueue_finalizers, volcano, volcano_podgroups, volcano_queues
from .quota import CLAIM_KEY, POD_KEY, QuotaController

_KUEUE_MARKER = (kueue.GROUP, "ClusterQueue")
_KUEUE_JOB_KINDS = {("batch", "Job"), ("ray.io", "RayJob")}
# Mutating webhooks that answer a create with the whole object encoded again, its kind the one they decode
# (controller-runtime pkg/webhook/admission/defaulter_custom.go, a patch from the decoded object to the defaulted
# one: Kueue's ClusterQueue and ResourceFlavor; volcano pkg/webhooks/admission/jobs/mutate/mutate_job.go, which
# decodes with pkg/webhooks/schema/schema.go DecodeJob, as the controllers lane's Volcano answers): a custom resource
# whose kind differs from the URL's has it set back before the API server's kind check, which comes with validation,
# after mutating admission.
_KIND_SETTING = {kueue_finalizers.CLUSTER_QUEUE, kueue_finalizers.RESOURCE_FLAVOR, volcano.JOB_KEY}


def _merge(*tables) -> dict:
    merged: dict = {}
    for table in tables:
        for key, fn in table.items():
            merged.setdefault(key, []).append(fn)
    return merged


class Admission:
    def __init__(self, store):
        self.store = store
        self.quota = QuotaController(store)
        self._mutators = _merge(volcano.MUTATORS, volcano_queues.MUTATORS, kueue.MUTATORS, kueue_finalizers.MUTATORS,
                                {key: partial(fn, store=store) for key, fn in volcano_podgroups.STORE_MUTATORS.items()})
        self._validators = _merge(kuberay.VALIDATORS, kueue.VALIDATORS, volcano.VALIDATORS,
                                  volcano_queues.VALIDATORS, volcano_podgroups.VALIDATORS)
        self._delete_validators = _merge(volcano_queues.DELETE_VALIDATORS)
        self._controllers = _merge(volcano_queues.CONTROLLERS, kueue_finalizers.CONTROLLERS)

    def _applies(self, rt, fn) -> bool:
        if rt.key in _KUEUE_JOB_KINDS and fn.__module__ == kueue.__name__:
            return _KUEUE_MARKER in self.store.registry.by_key
        return True

    def sets_kind(self, rt) -> bool:
        """Whether a create of this custom kind gets its kind from a mutating webhook (`_KIND_SETTING`)."""
        return rt.key in _KIND_SETTING and rt.key in self._mutators

    @staticmethod
    def default(op: str, rt, obj: dict, subresource: str | None) -> None:
        """The defaults of decoding a built-in kind (before the write's field manager records what it sets)."""
        if rt.builtin and not subresource:
            core.mutate(op, rt.key, obj)

    def mutate(self, op: str, rt, obj: dict, old: dict | None, subresource: str | None) -> None:
        if subresource:
            return
        for fn in self._mutators.get(rt.key, ()):
            fn(op, obj)
        if rt.key == POD_KEY and op == "CREATE":
            self.quota.default_from_limit_ranges(obj)

    def validate(self, op: str, rt, obj: dict, old: dict | None, subresource: str | None) -> None:
        if subresource:
            return
        if rt.builtin:
            causes = core.causes(op, rt.key, obj, old)
            if causes:
                meta = obj.get("metadata") or {}
                raise errors.invalid(rt.kind, rt.group, meta.get("name") or "", causes)
        for fn in self._validators.get(rt.key, ()):
            if self._applies(rt, fn):
                fn(op, obj, old, self.store)
        if rt.key == POD_KEY and op == "CREATE":
            self.quota.admit_pod(obj)
        if rt.key == CLAIM_KEY and op == "CREATE":
            self.quota.admit_pod(obj, claim=True)

    def validate_delete(self, rt, old: dict) -> None:
        for fn in self._delete_validators.get(rt.key, ()):
            fn("DELETE", None, old, self.store)

    def after_commit(self, event: str, rt, obj: dict, previous: dict | None = None) -> None:
        for fn in self._controllers.get(rt.key, ()):
            fn(event, obj, self.store, rt)
        if rt.namespaced and self.quota.watches(obj):
            self.quota.on_change(event, obj, self.store, rt, previous)

    def install_defaults(self) -> None:
        """What the controllers create when they start: Volcano's `root` and `default` queues."""
        volcano_queues.install_queues(self.store)
