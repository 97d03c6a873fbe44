"""A job's end (failed, preempted, cancelled) in words a person reads first; the scheduler's raw message follows.

Pure functions of the job's state and the message the cluster gave, so the page and the notification say the same.
"""

from __future__ import annotations

import re

from backends import backends
from backends.observe import REQUEUED  # noqa: F401 - the sentence pages and tests share

from .choices import JobState

_EXIT = re.compile(r"pod (?P<pod>\S+) failed with exit code (?P<code>\d+)", re.I)
_BACKOFF = re.compile(r"BackoffLimitExceeded", re.I)
_DEADLINE = re.compile(r"DeadlineExceeded|active deadline", re.I)
_OOM = re.compile(r"OOMKilled", re.I)
# The API server's answer when it refuses to create an object for good (portal/kube.py KubeError: "<code> <reason>:
# <message>"); an admission webhook's words follow "denied the request:" (k8s.io/apiserver
# pkg/admission/plugin/webhook/errors/statuserror.go).
_REFUSED = re.compile(r"^(?:400|403|404|409|422) \w+: (?:admission webhook \"(?P<hook>[^\"]+)\" denied the request: )?"
                      r"(?P<why>.*)$", re.S)




def _preempted(message: str) -> str:
    """The scheduler's own words for why, where one of them recognises its message."""
    said = next((sentence for backend in backends() if (sentence := backend.preempted_sentence(message))), "")
    return said or f"Preempted: a higher-priority job needed the GPUs. {REQUEUED}"


def _failed(message: str) -> str:
    refused = _REFUSED.match(message)
    if refused:
        by = f"its admission policy ({refused['hook']})" if refused["hook"] else "its API server"
        return f"Refused: the cluster would not create this job; {by} said: {refused['why']}. It never ran. " \
               "Change what it names and submit it again."
    if _OOM.search(message):
        return "Failed: a container ran out of memory. Ask for more memory per worker and resubmit."
    exit_code = _EXIT.search(message)
    if exit_code:
        return f"Failed: the program in pod {exit_code['pod']} exited with code {exit_code['code']}. Its log " \
               "below shows why."
    if _BACKOFF.search(message):
        return "Failed: the job's pods kept failing until its retry limit was reached. The pod logs below show why."
    if _DEADLINE.search(message):
        return "Failed: the job ran longer than its maximum run time and was stopped."
    return "Failed. The scheduler's message and the pod logs below say more."


def explain(state: str, message: str) -> str:
    """The sentence that leads a failed or preempted job's page; empty for other states."""
    if state == JobState.PREEMPTED:
        return _preempted(message or "")
    if state == JobState.FAILED:
        return _failed(message or "")
    return ""
