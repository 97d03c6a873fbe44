"""The demo's wiring, in one place: what a sandbox cluster needs from the portal that a real cluster gets from its
exporters and its nodes, and the demo data.

- `usage`: the synthetic usage of a sandbox cluster (it has no dcgm-exporter or kube-state-metrics), plugged into
  billing as the usage source of sandbox clusters without a Prometheus URL (`plug_in`, from the app's ready()).
- `placement`: the demo's nodes, topology and spot flavor, given to the sandbox over its API (the one module of the
  portal that imports the sandbox distribution).
- The commands `seed_demo` (everything, in order), `seed_jobs` and `seed_usage` (composition/management/commands/).
"""


def plug_in() -> None:
    from billing import sources

    from .usage import source_for_sandbox

    sources.register(source_for_sandbox)
