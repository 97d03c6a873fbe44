from django.db import models


class RequestState(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    WITHDRAWN = "withdrawn", "Withdrawn"


class ReservationState(models.TextChoices):
    PENDING = "pending", "Pending"
    BOOKED = "booked", "Booked"  # approved, not started
    ACTIVE = "active", "Active"  # its units are in the team's quota
    ENDED = "ended", "Ended"
    REJECTED = "rejected", "Rejected"
    CANCELLED = "cancelled", "Cancelled"
