"""A scheduler and kubelet for the sandbox: Kueue, Volcano, the Job controller and KubeRay, simulated.

`engine` keeps the clock and the jobs; `kueue` and `volcano` decide admission and preemption behind one small
interface (claims, snapshot, schedule, charge, and the status of their own record: Workload or PodGroup);
`workloads` writes each job kind's own status; `kubelet` creates pods and their logs.
"""

from .engine import Simulator
from .model import kueue_workload_name, pod_requests

__all__ = ["Simulator", "kueue_workload_name", "pod_requests"]
