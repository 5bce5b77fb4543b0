"""The workload: the last N actions, grouped back into their workflows,
with what the cost-aware algorithms need to know about lineage."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from typing import Any

from shared.store.datasets import mean_seconds


@dataclass(frozen=True)
class Candidate:
    """A dataset the algorithm may choose: STORED, unclaimed, managed."""

    hash: str
    size: int
    compute_time: float  # mean seconds to compute it
    last_used: float = 0.0


# Dataset states whose file exists (or will, once its producer ends) and is not on its way
# out: an ancestor in one of these is reused, not computed, when a descendant is recomputed.
PRESENT_STATES = frozenset({"STORED", "LEAF", "TO_STORE", "TO_LEAF"})


@dataclass
class Workload:
    """Workflows oldest first; each is the list of dataset hashes its actions used.

    The optional fields let an algorithm price the recomputation of a dataset with its
    ancestors (a deleted dataset is computed again from its nearest present ancestors):

    - ``parents``: hash -> its parents' hashes (the dataset's lineage);
    - ``compute_time``: hash -> mean seconds to compute it;
    - ``stored``: the hashes whose datasets are present now (STORED, LEAF, or being
      computed); ``None`` when unknown, and then only the candidates count as present.

    With the defaults (all empty) the cost-aware algorithms price a dataset by its own
    compute time alone, as if every ancestor were present.
    """

    workflows: list[list[str]] = field(default_factory=list)
    parents: dict[str, list[str]] = field(default_factory=dict)
    compute_time: dict[str, float] = field(default_factory=dict)
    stored: Set[str] | None = None

    def __len__(self) -> int:
        return len(self.workflows)

    def dataset_counts(self) -> Counter[str]:
        return Counter(h for wf in self.workflows for h in set(wf))

    def sublist(self, start: int, end: int | None = None) -> Workload:
        return Workload(self.workflows[max(0, start) : end], self.parents, self.compute_time, self.stored)

    @classmethod
    def from_actions(cls, actions: list[dict]) -> Workload:
        """From action documents (any order): grouped by workflow, ordered by submission."""
        groups: dict[str, tuple[float, list[str]]] = {}
        for a in actions:
            first, hashes = groups.get(a["workflow_id"], (a["created_at"], []))
            hashes.append(a["hash"])
            groups[a["workflow_id"]] = (min(first, a["created_at"]), hashes)
        return cls([h for _, h in sorted(groups.values(), key=lambda g: g[0])])

    def with_datasets(self, datasets: Iterable[dict[str, Any]]) -> Workload:
        """The same workload with lineage, compute times and presence from dataset documents
        (``_id``, ``state``, ``lineage.parents``, ``compute_seconds_total``, ``compute_count``).

        Give it the documents of the hashes in the window: a workflow holds every parent of
        its actions, so their lineage is then complete back to the window's start."""
        parents: dict[str, list[str]] = {}
        compute_time: dict[str, float] = {}
        stored: set[str] = set()
        for d in datasets:
            h = d["_id"]
            # nx-27017 answers a ``lineage.parents`` projection with that dotted key, flat;
            # MongoDB nests it under ``lineage``.
            parents[h] = list((d.get("lineage") or {}).get("parents") or d.get("lineage.parents") or [])
            if (mean := mean_seconds(d)) is not None:
                compute_time[h] = mean
            if d.get("state") in PRESENT_STATES:
                stored.add(h)
        return Workload(self.workflows, parents, compute_time, stored)
