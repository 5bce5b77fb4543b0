"""When to decide and how much to free: one rule for the decision service and the simulator."""

from __future__ import annotations


def bytes_to_free(used: int, capacity: int, threshold: float, target: float) -> int:
    """Past ``threshold x capacity``, free down to ``target x capacity``; otherwise nothing."""
    if used <= threshold * capacity:
        return 0
    return int(used - target * capacity)
