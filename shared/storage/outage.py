"""Losses or an outage? The reconcile sweep's safety stop (docs/planning.md, "The safety
stop").

A few datasets missing are losses: someone removed them, a disk lost a block; they are
marked LOST and computed again when needed. Many missing at once say the storage is not
the one the catalogue describes right now (unmounted, a wrong root, an empty folder
where the mount should be, a NameNode that answers from an empty namespace): marking
them would forget everything the catalogue knows, and the next plans would recompute it
all. Such a sweep marks nothing and is tried again at the next one.
"""

from __future__ import annotations

from dataclasses import dataclass

# A sweep stops when at least this many of the datasets it checked are missing or
# changed at once...
OUTAGE_FLOOR = 10
# ...and they are at least this share of them (so a large catalogue's few hundred
# genuine losses still count as losses).
OUTAGE_SHARE = 0.5


@dataclass(frozen=True)
class SweepFindings:
    checked: int  # datasets of this storage the sweep checked
    failed: int  # of them, missing or changed
    failed_under_root: int  # of those, under the managed root
    root_missing: bool  # the managed root itself is not there


def outage(found: SweepFindings) -> str | None:
    """Why ``found`` looks like an outage rather than losses; None: they are losses."""
    if found.root_missing and found.failed_under_root:
        return "the managed root itself is missing"
    if found.failed >= OUTAGE_FLOOR and found.failed >= OUTAGE_SHARE * found.checked:
        return f"{found.failed} of the {found.checked} datasets checked are missing or changed at once"
    return None
