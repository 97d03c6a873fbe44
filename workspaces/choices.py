from django.db import models


class Tool(models.TextChoices):
    JUPYTERLAB = "jupyterlab", "JupyterLab"
    CODE_SERVER = "code-server", "VS Code (code-server)"


class Stage(models.TextChoices):
    """Where a workspace is in its life. While ACTIVE or WARNED its run (a job) queues or runs; SUSPENDED has no
    run and keeps its home volume; DELETED keeps nothing in the cluster."""

    ACTIVE = "active", "Active"
    WARNED = "warned", "Warned: idle"
    SUSPENDED = "suspended", "Suspended"
    DELETED = "deleted", "Deleted"


LIVE_STAGES = (Stage.ACTIVE, Stage.WARNED)
