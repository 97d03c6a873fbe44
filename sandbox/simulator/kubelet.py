"""Pods and their logs: created when a job is admitted, Pending for the startup time, Running, then Succeeded or
Failed; deleted when the job is evicted or deleted. Placement is nominal (`gpu-node-<index % 8>`)."""

from __future__ import annotations

import random

from ..errors import ApiError
from .model import ALPHABET, Objects, Tracked, iso, owner


class Kubelet:
    def __init__(self, objects: Objects, writers: dict, seed: int = 0, devices=None):
        self.objects = objects
        self.store = objects.store
        self.writers = writers
        self.devices = devices  # dra.Devices: the pods' ResourceClaims
        self.unschedulable: set[tuple[str, str]] = set()  # pods whose claims could not be allocated
        self._random = random.Random(seed)

    def suffix(self) -> str:
        return "".join(self._random.choices(ALPHABET, k=5))

    def create_pods(self, job: Tracked, now: float) -> str:
        """Create the job's pods; answers the API server's refusal, if any (the job then fails, as its controller
        would report it)."""
        rt = self.store.registry.by_key[("", "Pod")]
        writer = self.writers[job.kind]
        budget = job.limit if job.limit is not None else job.pod_count
        for pod_set in job.pod_sets:
            if not pod_set.creates_pods:
                continue
            for index in range(pod_set.count):
                if budget <= 0:
                    return ""
                budget -= 1
                name = writer.pod_name(job, pod_set, index, self.suffix())
                template = pod_set.template
                labels = dict((template.get("metadata") or {}).get("labels") or {})
                annotations = dict((template.get("metadata") or {}).get("annotations") or {})
                writer.pod_metadata(job, pod_set, index, labels, annotations)
                spec = dict(template.get("spec") or {})
                if job.backend == "volcano":
                    spec["schedulerName"] = "volcano"
                placed = len(job.pods)  # the scheduler's node for this pod, where it chose one
                spec["nodeName"] = job.nodes[placed] if placed < len(job.nodes) else f"gpu-node-{index % 8}"
                pod = {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": job.namespace, "labels": labels,
                                    "annotations": annotations, "ownerReferences": [owner(job)]},
                       "spec": spec}
                try:
                    with self.objects.writing():
                        created = self.store.create(rt, pod)
                except ApiError as exc:
                    return f"Error creating pod: {exc}"
                job.pods.append(name)
                failure = self._claim(job, created, now)
                if failure:
                    return failure
                self.store.set_log(job.namespace, name, f"{iso(now)} pod {name} scheduled on {spec['nodeName']}\n")
        return ""

    def _claim(self, job: Tracked, pod: dict, now: float) -> str:
        """The pod's ResourceClaims from their templates, allocated; a pod whose devices cannot be found stays
        Pending (PodScheduled False, the scheduler's words)."""
        if self.devices is None or not (pod.get("spec") or {}).get("resourceClaims"):
            return ""
        statuses, refused, unschedulable = self.devices.claim(pod)
        if refused:
            return f"Error creating ResourceClaim for pod {pod['metadata']['name']}: {refused}"
        status = {"resourceClaimStatuses": statuses}
        if unschedulable:
            self.unschedulable.add((job.namespace, pod["metadata"]["name"]))
            status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": unschedulable, "lastTransitionTime": iso(now)}]
        self.objects.patch_status("v1", "Pod", job.namespace, pod["metadata"]["name"], status)
        return ""

    def start(self, job: Tracked, now: float) -> None:
        for index, pod in enumerate(job.pods):
            if (job.namespace, pod) in self.unschedulable:
                continue
            self.objects.patch_status("v1", "Pod", job.namespace, pod, {
                "phase": "Running", "startTime": iso(job.admitted_at), "podIP": f"10.0.{job.seq % 250}.{index + 1}",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": iso(now)}]})
            self.store.append_log(job.namespace, pod, f"{iso(now)} started {job.kind[1]} {job.name}\n")

    def end(self, job: Tracked, now: float, succeeded: bool) -> None:
        phase = "Succeeded" if succeeded else "Failed"
        for pod in job.pods:
            if not pod:
                continue
            self.objects.patch_status("v1", "Pod", job.namespace, pod, {"phase": phase, "conditions": [
                {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": iso(now)}]})
            self.store.append_log(job.namespace, pod, f"{iso(now)} exited with code {0 if succeeded else 1}\n")
        self._release(job)

    def _release(self, job: Tracked) -> None:
        if self.devices is not None:
            self.devices.release(job.namespace, [p for p in job.pods if p])
        self.unschedulable -= {(job.namespace, p) for p in job.pods}

    def delete(self, job: Tracked) -> None:
        self._release(job)
        for pod in job.pods:
            if pod:
                self.objects.delete("v1", "Pod", job.namespace, pod)
        job.pods = []
