"""kubectl (Debian's kubernetes-client) pointed at a sandbox, as a user drives a cluster by hand."""

import shutil
import subprocess

from sandbox.tests.requires import unavailable


def kubectl_for(sandbox, folder):
    """run(*args, stdin=None) → the CompletedProcess of kubectl against `sandbox` (kubeconfig written in `folder`)."""
    binary = shutil.which("kubectl")
    if binary is None:
        unavailable("kubectl is not installed: the kubectl suite was not run")
    config = folder / "config"
    sandbox.write_kubeconfig(config)

    def run(*args, stdin=None):
        return subprocess.run([binary, "--kubeconfig", str(config), *args], input=stdin, capture_output=True,
                              text=True, timeout=60)

    return run
