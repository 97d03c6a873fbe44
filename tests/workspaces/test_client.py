"""The Python client starts, reads, suspends, resumes and deletes a workspace against a live portal, a real token
and a sandbox; the access token is in the start answer only, and bad input comes back as the API's words."""

import pytest
from gpu_portal_client import ValidationError

from jobs import sync as job_sync
from tests.api.test_client import portal, running_sandbox, world  # noqa: F401 - the fixtures, shared
from tests.jobs.conftest import step

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_workspace_from_a_notebook(portal, world, running_sandbox, settings):  # noqa: F811
    image = portal.workspace_images()["images"]["jupyterlab"][0]
    assert image == settings.WORKSPACE_IMAGES["jupyterlab"][0]
    ws = portal.start_workspace(name="nb", image=image, flavor="h100", gpus=2, volume_gib=10)
    assert len(ws.access_token) >= 40 and ws.stage == "active" and ws.run_state == "queued"
    assert ws.port_forward.startswith("kubectl -n nlp port-forward service/ws-nb-")
    step(running_sandbox, 0)
    step(running_sandbox, 10)
    job_sync.job_status_sync(cluster=world["cluster"])
    assert ws.refresh().run_state == "running" and ws.access_token  # kept on this object, never sent again
    assert "access_token" not in portal.workspace(ws.id).data
    assert ws.suspend().stage == "suspended" and ws.run_state is None and not ws.volume_deleted
    assert ws.resume().stage == "active"
    assert ws.delete().stage == "deleted" and ws.volume_deleted
    assert [w["name"] for w in portal.workspaces()] == []


def test_an_image_off_the_list_is_refused_with_the_choices(portal, world):  # noqa: F811
    with pytest.raises(ValidationError) as bad:
        portal.start_workspace(name="nb", image="docker.io/me/anything:1", flavor="h100")
    assert "Choose one of the platform's jupyterlab images" in str(bad.value.fields["image"])
