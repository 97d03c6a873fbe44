from django.apps import AppConfig


class BackendsConfig(AppConfig):
    """No models: installed so that every scheduler's backend is registered (on import) before any app asks."""

    name = "backends"
