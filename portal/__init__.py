"""The ground floor: the Kubernetes gateway, the reconcile engine, naming, the HTTP/API base and the desired-state
registry. It imports no app; the wiring that names every app is `config/`."""
