from backends.choices import JobKind, JobState, Placement

__all__ = ["JobKind", "JobState", "Placement", "TERMINAL_STATES"]


TERMINAL_STATES = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
