"""`make controlplane SCHEDULERS=kueue,volcano,kuberay`: the control plane of `tools.controlplane` with the batch
schedulers on it and a few fake GPU nodes, in the foreground until Ctrl-C. The kubeconfig is the control plane's
(var/controlplane/kubeconfig, context `controlplane`): register a cluster with connection "kubeconfig context" and
that context, and the portal drives the real Kueue or Volcano."""

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from sandbox.simulator import dra
from tools import controllers, controlplane


def main(argv=None) -> int:
    default_crds = os.environ.get("CRDS_DIR") or str(controlplane.ROOT.parent / "shared" / "crds")
    parser = argparse.ArgumentParser(prog="python -m tools.controllers", description=__doc__)
    parser.add_argument("--schedulers", default=",".join(controllers.SCHEDULERS),
                        help="comma-separated: any of kueue, volcano, kuberay")
    parser.add_argument("--crds-dir", default=default_crds, help="folder of upstream CRDs to install")
    parser.add_argument("--kubeconfig", default=str(controlplane.KUBECONFIG), help="where to write the kubeconfig")
    parser.add_argument("--nodes", type=int, default=4, help="fake nodes with 8 nvidia.com/gpu each")
    parser.add_argument("--node-labels", default="", help="labels of the fake nodes, k=v,k=v (a flavor's labels)")
    parser.add_argument("--dra-nodes", type=int, default=0,
                        help="fake nodes publishing 8 GPUs each through NVIDIA's DRA driver's DeviceClasses and "
                             "ResourceSlices; Kueue maps gpu.nvidia.com to gpu.nvidia.com/devices (and MIG alike)")
    parser.add_argument("--dra-node-labels", default="", help="labels of the DRA nodes, k=v,k=v (the flavor's)")
    args = parser.parse_args(argv)
    schedulers = [s for s in args.schedulers.split(",") if s]
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    started = time.monotonic()
    try:
        plane = controlplane.start(crds_dir=Path(args.crds_dir), kubeconfig=args.kubeconfig)
    except controlplane.ControlPlaneError as exc:
        print(exc, file=sys.stderr)
        return 1
    with plane:
        try:
            kueue_config = {"resources": {"deviceClassMappings": [
                {"name": name, "deviceClassNames": [cls]} for cls, name in dra.NVIDIA_MAPPINGS.items()]}} \
                if args.dra_nodes else None
            controllers.start(plane, schedulers, kueue_config=kueue_config, dra=bool(args.dra_nodes))
            for prefix, count, pairs, gpus in (("gpu-node", args.nodes, args.node_labels, {"nvidia.com/gpu": 8}),
                                               ("dra-node", args.dra_nodes, args.dra_node_labels, {})):
                labels = dict(pair.split("=", 1) for pair in pairs.split(",") if pair)
                for index in range(count):
                    controllers.add_node(plane, f"{prefix}-{index}", labels=labels, allocatable={
                        **gpus, "cpu": 96, "memory": "1024Gi", "pods": 110})
            if args.dra_nodes:
                controllers.publish_devices(plane, dra.device_classes() + [
                    dra.resource_slice(f"dra-node-{index}", index) for index in range(args.dra_nodes)])
        except controlplane.ControlPlaneError as exc:
            print(exc, file=sys.stderr)
            return 1
        print(f"Control plane at {plane.server} with {', '.join(schedulers)}, ready in "
              f"{time.monotonic() - started:.1f} s. Kubeconfig: {args.kubeconfig} (context {controlplane.CONTEXT!r}); "
              f"logs in {plane.workdir}. Ctrl-C stops it.", flush=True)
        try:
            while plane.alive():
                time.sleep(1)
        except KeyboardInterrupt:
            print("Stopping.", flush=True)
            return 0
        for name, process in plane.processes.items():
            if process.poll() is not None:
                print(f"{name} exited with {process.returncode}:\n{plane.log_tail(name)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
