"""`Sandbox`: a Kubernetes API emulator served over HTTP from a background thread."""

from __future__ import annotations

import contextlib
import os
import socket
import threading

from . import kubeconfig as _kubeconfig
from .faults import Faults
from .kinds import Registry, resource_type_from_crd
from .persistence import StateFile
from .request import Stats
from .server import Api, ApiServer
from .simulator import Simulator
from .store import DELETED, Store
from .validation import Validator
from .watch_stream import BOOKMARK_INTERVAL

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class Sandbox:
    """An in-memory Kubernetes API server on localhost.

    `crd_dirs`: folders of CustomResourceDefinition YAML to serve (and validate against).
    `builtin_custom_kinds`: register permissive CRDs for the portal's Kueue/Volcano/KubeRay kinds that `crd_dirs` did
    not provide; None means "only when `crd_dirs` is empty".
    `state_file`: load at start when present, save after changes and at stop.
    `bookmark_interval`: seconds between a watch's BOOKMARK events (a kube-apiserver's minute by default).
    `simulate`: run queued jobs (see `sandbox.simulator`); `tick` is the background step interval in seconds, or
    None to leave stepping to the caller (`sb.simulator.step(now)`); `simulation` holds the Simulator's options.
    """

    def __init__(self, crd_dirs=(), builtin_custom_kinds: bool | None = None,
                 state_file: str | os.PathLike | None = None, host: str = "127.0.0.1", port: int = 0,
                 simulate: bool = False, tick: float | None = 0.25, simulation: dict | None = None,
                 bookmark_interval: float = BOOKMARK_INTERVAL):
        crd_dirs = tuple(crd_dirs or ())
        self.registry = Registry.build(crd_dirs, builtin_custom_kinds)
        self.validator = Validator(registry=self.registry)
        self.store = Store(self.registry, self.validator)
        self.faults = Faults()
        self._stats = Stats(self.store)
        self._host, self._port = host, port
        self._state = StateFile(self.store, state_file) if state_file else None
        self._server: ApiServer | None = None
        self._thread: threading.Thread | None = None
        self.store.subscribe(self._on_crd_change)
        self.simulator = Simulator(self.store, **(simulation or {})) if simulate else None
        self._tick = tick
        self.bookmark_interval = bookmark_interval

    def _on_crd_change(self, event_type, rt, obj) -> None:
        """CRDs created through the API are served like the ones loaded from files."""
        if rt.key != ("apiextensions.k8s.io", "CustomResourceDefinition"):
            return
        spec = obj.get("spec") or {}
        if event_type == DELETED:
            self.registry.remove(spec.get("group", ""), (spec.get("names") or {}).get("kind", ""))
        else:
            with contextlib.suppress(KeyError, TypeError, ValueError):
                self.registry.add(resource_type_from_crd(obj))

    # Lifecycle -------------------------------------------------------------------------------------------------

    def start(self) -> Sandbox:
        if self._state is not None:
            self._state.load()
        existing = {o["metadata"]["name"] for o in self.store.list(self.registry.by_key[("", "Namespace")])["items"]}
        for name in DEFAULT_NAMESPACES:
            if name not in existing:
                self.store.create(self.registry.by_key[("", "Namespace")], {"metadata": {"name": name}})
        self.store.admission.install_defaults()
        self._stats.reset()
        self._server = ApiServer((self._host, self._port), Api(self.store, self.faults, self._stats,
                                                                self.simulator, self.bookmark_interval))
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="sandbox-server", daemon=True)
        self._thread.start()
        if self._state is not None:
            self._state.start()
        if self.simulator is not None:
            self.simulator.adopt()
            if self._tick:
                self.simulator.start(self._tick)
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        server, self._server = self._server, None
        if self.simulator is not None:
            self.simulator.stop()
        shutter = threading.Thread(target=server.shutdown)
        shutter.start()
        with contextlib.suppress(OSError):  # wakes the accept loop so shutdown needn't wait for its poll
            socket.create_connection(server.server_address[:2], timeout=0.2).close()
        shutter.join()
        server.close_connections()
        server.server_close()
        self._thread.join(timeout=5)
        if self._state is not None:
            self._state.stop()

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # Access ----------------------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the sandbox is not running")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    def kubeconfig(self, context: str = "sandbox") -> dict:
        return _kubeconfig.kubeconfig(self.url, context)

    def write_kubeconfig(self, path: str | os.PathLike, context: str = "sandbox") -> None:
        _kubeconfig.write_kubeconfig(path, self.url, context)

    def stats(self) -> dict:
        return self._stats.snapshot()

    def reset_stats(self) -> None:
        self._stats.reset()
