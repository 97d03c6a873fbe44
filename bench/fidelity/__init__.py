"""Sandbox fidelity, measured: one corpus of requests replayed against the real kube-apiserver (tools/controlplane)
and against the sandbox, answers compared (`python -m bench.fidelity`, report in bench/FIDELITY.md)."""
