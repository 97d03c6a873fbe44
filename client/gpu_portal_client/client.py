"""`Portal(url, token)`: the GPU Portal API in a few lines of a notebook.

    portal = Portal("https://gpu.example.com", token)
    job = portal.submit_pytorch(team="nlp", name="finetune", image="ghcr.io/acme/train:1.2",
                                command=["torchrun", "train.py"], flavor="h100", workers=2, gpus_per_worker=8)
    job.wait(progress=True)
    print(job.logs())
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import requests

from .errors import JobFailed, PortalError, RateLimited, ServerError, error_for
from .progress import Progress

TERMINAL_STATES = {"succeeded", "failed", "cancelled"}


class Portal:
    def __init__(self, url: str, token: str | None = None, *, timeout: float = 30.0,
                 session: requests.Session | None = None):
        token = token or os.environ.get("GPU_PORTAL_TOKEN")
        if not token:
            raise ValueError("Give a personal access token (from the portal's Tokens page) or set GPU_PORTAL_TOKEN.")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = session or requests.Session()
        self.session.headers.update({"Authorization": f"Bearer {token}", "Accept": "application/json"})

    def __repr__(self) -> str:
        return f"Portal({self.url!r})"  # never the token

    # --- HTTP -------------------------------------------------------------------------------------------------

    def request(self, method: str, path: str, *, params: dict | None = None, json: Any = None) -> Any:
        """One call to /api/v1; an error answer raises the matching PortalError subclass with the API's message."""
        url = path if path.startswith("http") else f"{self.url}/api/v1/{path.lstrip('/')}"
        try:
            response = self.session.request(method, url, params=params, json=json, timeout=self.timeout)
        except requests.RequestException as exc:
            raise ServerError(0, "unreachable", f"The portal at {self.url} could not be reached: {exc}") from exc
        if response.status_code == 204:
            return None
        try:
            body = response.json()
        except ValueError:
            body = response.text
        if response.status_code >= 400:
            error = error_for(response.status_code, body)
            if isinstance(error, RateLimited):
                error.retry_after = float(response.headers.get("Retry-After", "1"))
            raise error
        return body

    def get(self, path: str, **params) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: dict | None = None) -> Any:
        return self.request("POST", path, json=body or {})

    def pages(self, path: str, **params) -> Iterator[dict]:
        """Every item of a paged list, following the cursor links."""
        page = self.get(path, **params)
        while True:
            yield from page["results"]
            if not page.get("next"):
                return
            page = self.request("GET", page["next"])

    # --- who and where ----------------------------------------------------------------------------------------

    def me(self) -> dict:
        return self.get("me/")

    def teams(self) -> list[dict]:
        return list(self.pages("teams/"))

    def default_team(self) -> str:
        """The caller's team when there is exactly one; otherwise every call must name it."""
        teams = self.me()["teams"]
        if len(teams) != 1:
            names = ", ".join(t["slug"] for t in teams) or "none"
            raise ValueError(f"Name the team: you belong to {len(teams)} ({names}).")
        return teams[0]["slug"]

    def flavors(self, cluster: str | None = None) -> list[dict]:
        return list(self.pages("flavors/", cluster=cluster))

    # --- quota ------------------------------------------------------------------------------------------------

    def quota(self, team: str | None = None) -> list[dict]:
        """What the team holds per flavor: guaranteed_units, burst_units, limit_units, in_use_units, …"""
        return list(self.pages(f"teams/{team or self.default_team()}/quotas/"))

    def request_quota(self, *, guaranteed_units: int, justification: str, flavor: str | None = None,
                      flavor_id: int | None = None, team: str | None = None, **options) -> dict:
        """Ask for a new total of one flavor, named as `submit` names it (`cluster=` when several clusters have it);
        `flavor_id` is still accepted."""
        which = {"flavor": flavor} if flavor is not None else {"flavor_id": flavor_id}
        return self.post("quota-requests/", {"team": team or self.default_team(), **which,
                                             "guaranteed_units": guaranteed_units, "justification": justification,
                                             **options})

    def quota_evidence(self, request_id: int) -> dict:
        """The last 30 days of a request's team and flavor: `sentence`, allocated/used GPU-hours, p50/p95 of units
        held, idle share and cost, GPU-hours waited by reason, and the hours (guaranteed, held, borrowed,
        waiting)."""
        return self.get(f"quota-requests/{request_id}/evidence/")

    def reserve(self, *, flavor: str, units: int, starts_at: str, ends_at: str, justification: str,
                team: str | None = None, cluster: str | None = None) -> dict:
        """Book `units` of a flavor for [starts_at, ends_at) (ISO 8601, UTC), on top of the team's quota; a
        platform admin decides. Windows that only touch never overlap."""
        return self.post("reservations/", {"team": team or self.default_team(), "flavor": flavor, "units": units,
                                           "starts_at": starts_at, "ends_at": ends_at, "justification": justification,
                                           **({"cluster": cluster} if cluster else {})})

    def reservations(self, **filters) -> list[dict]:
        """The reservations you may see (filters: state, team)."""
        return list(self.pages("reservations/", **filters))

    def cancel_reservation(self, reservation_id: int) -> dict:
        return self.post(f"reservations/{reservation_id}/cancel/")

    def calendar(self, flavor: str, *, cluster: str | None = None, days: int = 56) -> dict:
        """Guaranteed and free units of a flavor per day from today, stacked by team."""
        return self.get("calendar/", flavor=flavor, days=days, **({"cluster": cluster} if cluster else {}))

    def rightsizing(self) -> list[dict]:
        """Recommended guaranteed quota per team and flavor, the largest changes first (platform and team
        admins)."""
        return self.get("rightsizing/")

    # --- jobs -------------------------------------------------------------------------------------------------

    def submit(self, *, kind: str, name: str, image: str, command: list[str], flavor: str,
               team: str | None = None, **options) -> Job:
        """Submit a job of any kind; `options` are the API's fields (workers, gpus_per_worker, env, priority, …)."""
        if isinstance(command, str):
            raise TypeError("Give the command as a list of arguments, e.g. ['python', 'train.py'].")
        body = {"team": team or self.default_team(), "kind": kind, "name": name, "image": image,
                "command": list(command), "flavor": flavor, **options}
        return Job(self, self.post("jobs/", body))

    def submit_pytorch(self, *, name: str, image: str, command: list[str], flavor: str, workers: int = 1,
                       gpus_per_worker: int = 1, **options) -> Job:
        return self.submit(kind="pytorch", name=name, image=image, command=command, flavor=flavor, workers=workers,
                           gpus_per_worker=gpus_per_worker, **options)

    def submit_ray(self, *, name: str, image: str, command: list[str], flavor: str, workers: int = 1,
                   gpus_per_worker: int = 1, **options) -> Job:
        return self.submit(kind="ray", name=name, image=image, command=command, flavor=flavor, workers=workers,
                           gpus_per_worker=gpus_per_worker, **options)

    def submit_batch(self, *, name: str, image: str, command: list[str], flavor: str, gpus_per_worker: int = 1,
                     **options) -> Job:
        return self.submit(kind="batch", name=name, image=image, command=command, flavor=flavor,
                           gpus_per_worker=gpus_per_worker, **options)

    def job(self, job_id: int) -> Job:
        return Job(self, self.get(f"jobs/{int(job_id)}/"))

    def report_progress(self, job_id: int, *, done: int, total: int) -> dict:
        """Tell the portal how far a running job is (from its training loop: `done` of `total` steps); the job's
        expected end, and the start estimates of the jobs waiting for its GPUs, are projected from it. Only the
        latest report is kept; one a minute or so is plenty."""
        return self.post(f"jobs/{int(job_id)}/progress/", {"done": int(done), "total": int(total)})

    def jobs(self, **filters) -> Iterator[dict]:
        """Job summaries, newest first; filters: team, state, kind, user, flavor, cluster, submitted_after/before."""
        return self.pages("jobs/", **filters)

    # --- workspaces -------------------------------------------------------------------------------------------

    def workspace_images(self) -> dict:
        """The images the platform offers per tool, and whether any image is allowed."""
        return self.get("workspaces/images/")

    def start_workspace(self, *, name: str, image: str, flavor: str, tool: str = "jupyterlab", gpus: int = 1,
                        volume_gib: int = 50, team: str | None = None, **options) -> Workspace:
        """Start a JupyterLab ('jupyterlab') or VS Code ('code-server') workspace; `options`: cpu, memory_gib,
        priority, cluster. Its `access_token` is in this answer only: keep it."""
        body = {"team": team or self.default_team(), "name": name, "image": image, "flavor": flavor, "tool": tool,
                "gpus": gpus, "volume_gib": volume_gib, **options}
        return Workspace(self, self.post("workspaces/", body))

    def workspace(self, workspace_id: int) -> Workspace:
        return Workspace(self, self.get(f"workspaces/{int(workspace_id)}/"))

    def workspaces(self) -> list[dict]:
        return self.get("workspaces/")

    # --- usage and cost ---------------------------------------------------------------------------------------

    def usage(self, team: str | None = None, **params) -> dict:
        """GPU-hours per day and flavor for a period (start, end as ISO dates)."""
        return self.get(f"teams/{team or self.default_team()}/usage/", **params)

    def statement(self, month: str | None = None, team: str | None = None) -> dict:
        """A team's monthly statement (month as 'YYYY-MM'; the current month by default)."""
        month = month or datetime.now(UTC).strftime("%Y-%m")
        return self.get(f"teams/{team or self.default_team()}/statements/{month}/")

    def budget(self, team: str | None = None, month: str | None = None) -> dict:
        """A team's budget and spend for a month, and what holds its new jobs now: `held`, `holds` (each with the
        sentence, how far over, and who can lift it) and `allowances` (GPU-hours used of each over its window)."""
        params = {"month": month} if month else {}
        return self.get(f"teams/{team or self.default_team()}/budget/", **params)


class _Record:
    """An object the API returned: its fields are attributes (obj.state, …) as of the last refresh."""

    def __init__(self, portal: Portal, data: dict):
        self.portal = portal
        self.data = data

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["data"][name]
        except KeyError:
            raise AttributeError(name) from None


class Job(_Record):
    """A submitted job; attributes mirror the API's fields (job.state, job.gpus, …) as of the last refresh."""

    def __repr__(self) -> str:
        return f"<Job {self.data['id']} {self.data['team']}/{self.data['name']} {self.data['state']}>"

    @property
    def terminal(self) -> bool:
        return self.data["state"] in TERMINAL_STATES

    def refresh(self) -> Job:
        self.data = self.portal.get(f"jobs/{self.id}/")
        return self

    def cancel(self) -> Job:
        self.data = self.portal.post(f"jobs/{self.id}/cancel/")
        return self

    def resubmit(self) -> Job:
        return Job(self.portal, self.portal.post(f"jobs/{self.id}/resubmit/"))

    def report_progress(self, *, done: int, total: int) -> dict:
        """The job's progress (see Portal.report_progress); also kept as `job.progress`."""
        self.data = {**self.data, "progress": self.portal.report_progress(self.id, done=done, total=total)}
        return self.data["progress"]

    def why_waiting(self) -> str:
        return self.portal.get(f"jobs/{self.id}/why-waiting/")["message"]

    def yaml(self) -> str:
        return self.portal.get(f"jobs/{self.id}/yaml/")["yaml"]

    def logs(self) -> str:
        """The last lines of every pod's log, each under its pod's name."""
        pods = self.portal.get(f"jobs/{self.id}/logs/")["pods"]
        return "\n".join(f"==> {pod['name']} ({pod['phase']}) <==\n{pod['log']}" for pod in pods)

    def wait(self, *, timeout: float | None = None, poll_seconds: float = 5.0, progress: bool = False,
             raise_on_failure: bool = False, stream=None) -> Job:
        """Poll until the job ends (or `timeout` seconds pass: TimeoutError). With progress=True a status line
        (tqdm in notebooks and terminals when installed, else a plain line) shows its state and why it waits."""
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = Progress(f"job {self.id} {self.data['name']}", stream=stream) if progress else None
        try:
            while True:
                if bar:
                    bar.update(self._status_line())
                if self.terminal:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"Job {self.id} is still {self.state} after {timeout} s.")
                time.sleep(poll_seconds)
                try:
                    self.refresh()
                except RateLimited as exc:
                    time.sleep(exc.retry_after)
        finally:
            if bar:
                bar.close()
        if raise_on_failure and self.state != "succeeded":
            raise JobFailed(200, self.state, f"Job {self.id} {self.state}: {self.state_message}")
        return self

    def _status_line(self) -> str:
        state = self.data["state"]
        if state in ("pending", "queued"):
            why = self.why_waiting()
            return f"{state}: {why}" if why else state
        return f"{state}: {self.data['state_message']}" if self.data.get("state_message") else state



class Workspace(_Record):
    """A workspace; attributes mirror the API's fields (ws.stage, ws.url, ws.port_forward, …) as of the last
    refresh. `access_token` is there only on the workspace `Portal.start_workspace` returned."""

    def __repr__(self) -> str:
        return f"<Workspace {self.data['id']} {self.data['team']}/{self.data['name']} {self.data['stage']}>"

    def _act(self, action: str) -> Workspace:
        token = self.data.get("access_token")
        self.data = self.portal.post(f"workspaces/{self.data['id']}/{action}/")
        if token:
            self.data["access_token"] = token
        return self

    def refresh(self) -> Workspace:
        token = self.data.get("access_token")
        self.data = self.portal.get(f"workspaces/{self.data['id']}/")
        if token:
            self.data["access_token"] = token
        return self

    def suspend(self) -> Workspace:
        return self._act("suspend")

    def resume(self) -> Workspace:
        return self._act("resume")

    def keep_running(self) -> Workspace:
        return self._act("keep")

    def delete(self) -> Workspace:
        self.data = self.portal.request("DELETE", f"workspaces/{self.data['id']}/")
        return self


__all__ = ["Job", "Portal", "PortalError", "Workspace"]
