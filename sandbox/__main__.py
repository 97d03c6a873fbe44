"""`python -m sandbox serve --port N [--host H] [--crds DIR ...] [--state FILE] [--kubeconfig PATH] [--simulate]
[--dra-nodes N]`."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from .cluster import Sandbox
from .simulator.dra import NVIDIA_MAPPINGS

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description="A Kubernetes API emulator.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the API until SIGINT/SIGTERM")
    serve.add_argument("--port", type=int, default=8001)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--crds", nargs="*", default=[], metavar="DIR", help="folders of CRD YAML to serve")
    serve.add_argument("--builtin-custom-kinds", action="store_true",
                       help="also register permissive portal kinds that --crds did not provide")
    serve.add_argument("--state", help="state file: loaded at start, saved after changes and at shutdown")
    serve.add_argument("--kubeconfig", help="write a kubeconfig for this server here")
    serve.add_argument("--simulate", action="store_true",
                       help="run queued jobs: simulate Kueue, Volcano, the Job controller, KubeRay and the kubelet")
    serve.add_argument("--dra-nodes", type=int, default=0, metavar="N",
                       help="with --simulate: N nodes of 8 GPUs published by NVIDIA's DRA driver (DeviceClasses "
                            "gpu.nvidia.com and mig.nvidia.com, a ResourceSlice per node), and Kueue configured to "
                            "count them (deviceClassMappings gpu.nvidia.com/devices, mig.nvidia.com/devices)")
    serve.add_argument("--bookmark-interval", type=float, default=60.0, metavar="SECONDS",
                       help="seconds between the BOOKMARK events of a watch that allows them (default 60)")
    args = parser.parse_args(argv)

    requested: list[int] = []

    def request_stop(signum, frame) -> None:
        # Only an append: no lock that a handler re-entered by the next signal could wait on. `make run` stops its
        # process group with `kill 0`, which may reach this process many times over.
        requested.append(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, request_stop)
    sandbox = Sandbox(crd_dirs=args.crds, builtin_custom_kinds=True if args.builtin_custom_kinds else None,
                      state_file=args.state, host=args.host, port=args.port, simulate=args.simulate,
                      simulation={"dra_nodes": args.dra_nodes, "kueue_mappings": NVIDIA_MAPPINGS} if args.dra_nodes
                      else None,
                      bookmark_interval=args.bookmark_interval).start()
    if args.kubeconfig:
        sandbox.write_kubeconfig(args.kubeconfig)
    print(f"sandbox serving on {sandbox.url}", flush=True)
    try:
        while not requested:
            time.sleep(0.2)
    finally:
        for sig in STOP_SIGNALS:  # stopping once is enough; a later signal must not cut the state file's save short
            signal.signal(sig, signal.SIG_IGN)
        sandbox.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
