"""A failed or preempted job's page leads with a sentence in words; the raw reason and UIDs only follow."""

import pytest

from jobs.outcome import REQUEUED, explain

CASES = [
    ("kueue preemption within the ClusterQueue", "preempted",
     "Preempted to accommodate a workload (UID: 465c, JobUID: 58cb) due to prioritization in the ClusterQueue; "
     "preemptor path: /east/nlp; preemptee path: /east/nlp",
     "Preempted: a higher-priority job of the same team needed the GPUs. " + REQUEUED),
    ("kueue reclamation", "preempted",
     "Preempted to accommodate a workload (UID: a, JobUID: b) due to reclamation within the cohort",
     "Preempted: another team took back the guaranteed quota this job was borrowing. " + REQUEUED),
    ("kueue fair sharing", "preempted",
     "Preempted to accommodate a workload (UID: a, JobUID: b) due to Fair Sharing within the cohort",
     "Preempted: fair sharing gave the GPUs to a team that had used less. " + REQUEUED),
    ("volcano preempt", "preempted", "Evicted by preempt to schedule ml-research/eval-urgent-18",
     "Preempted: the scheduler stopped this job to make room for ml-research/eval-urgent-18, which has a higher "
     "priority. " + REQUEUED),
    ("volcano reclaim", "preempted", "Evicted by reclaim to schedule vision/train-3",
     "Preempted: another team took back the quota this job was borrowing, for vision/train-3. " + REQUEUED),
    ("unknown preemption", "preempted", "",
     "Preempted: a higher-priority job needed the GPUs. " + REQUEUED),
    ("exit code", "failed", "pod train-11-master-0 failed with exit code 137",
     "Failed: the program in pod train-11-master-0 exited with code 137. Its log below shows why."),
    ("backoff", "failed", "BackoffLimitExceeded: Job has reached the specified backoff limit",
     "Failed: the job's pods kept failing until its retry limit was reached. The pod logs below show why."),
    ("deadline", "failed", "DeadlineExceeded: Job was active longer than specified deadline",
     "Failed: the job ran longer than its maximum run time and was stopped."),
    ("out of memory", "failed", "pod x failed: OOMKilled",
     "Failed: a container ran out of memory. Ask for more memory per worker and resubmit."),
    ("unknown failure", "failed", "", "Failed. The scheduler's message and the pod logs below say more."),
    ("running says nothing", "running", "whatever", ""),
]


@pytest.mark.parametrize(("state", "message", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_explain(state, message, expected):
    assert explain(state, message) == expected
    assert "UID" not in explain(state, message)
