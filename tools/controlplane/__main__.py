"""`make controlplane`: start etcd, kube-apiserver and kube-controller-manager, install the upstream CRDs, write
the kubeconfig to var/controlplane/kubeconfig, print it and stay in the foreground until Ctrl-C."""

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from tools import controlplane


def main(argv=None) -> int:
    default_crds = os.environ.get("CRDS_DIR") or str(controlplane.ROOT.parent / "shared" / "crds")
    parser = argparse.ArgumentParser(prog="python -m tools.controlplane", description=__doc__)
    parser.add_argument("--crds-dir", default=default_crds, help="folder of upstream CRDs to install ('' for none)")
    parser.add_argument("--kubeconfig", default=str(controlplane.KUBECONFIG), help="where to write the kubeconfig")
    args = parser.parse_args(argv)
    crds = Path(args.crds_dir) if args.crds_dir else None
    if crds and not crds.is_dir():
        parser.error(f"--crds-dir {crds} is not a folder (set CRDS_DIR, or pass --crds-dir '')")
    # SIGTERM (as from `kill`) stops the components in order, like Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    started = time.monotonic()
    try:
        plane = controlplane.start(crds_dir=crds, kubeconfig=args.kubeconfig)
    except controlplane.ControlPlaneError as exc:
        print(exc, file=sys.stderr)
        return 1
    with plane:
        print(Path(args.kubeconfig).read_text())
        installed = len(controlplane.crd_documents(crds)) if crds else 0
        print(f"Control plane at {plane.server}, ready in {time.monotonic() - started:.1f} s, {installed} CRDs "
              f"installed. Kubeconfig: {args.kubeconfig} (context {controlplane.CONTEXT!r}); logs in "
              f"{plane.workdir}. Ctrl-C stops it.", flush=True)
        try:
            while plane.alive():
                time.sleep(1)
        except KeyboardInterrupt:
            print("Stopping.", flush=True)
            return 0
        dead = [name for name, p in plane.processes.items() if p.poll() is not None]
        for name in dead:
            print(f"{name} exited with {plane.processes[name].returncode}:\n{plane.log_tail(name)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
