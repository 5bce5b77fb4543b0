"""The simplified workflow history: the last N actions, grouped back into their workflows."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Candidate:
    """A dataset the algorithm may choose: STORED, unclaimed, managed."""

    hash: str
    size: int
    compute_time: float  # mean seconds to compute it
    last_used: float = 0.0


@dataclass
class SimplifiedHistory:
    """Workflows oldest first; each is the list of dataset hashes its actions used."""

    workflows: list[list[str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.workflows)

    def dataset_counts(self) -> Counter[str]:
        return Counter(h for wf in self.workflows for h in set(wf))

    def sublist(self, start: int, end: int | None = None) -> SimplifiedHistory:
        return SimplifiedHistory(self.workflows[max(0, start) : end])

    @classmethod
    def from_actions(cls, actions: list[dict]) -> SimplifiedHistory:
        """From action documents (any order): grouped by workflow, ordered by submission."""
        groups: dict[str, tuple[float, list[str]]] = {}
        for a in actions:
            first, hashes = groups.get(a["workflow_id"], (a["created_at"], []))
            hashes.append(a["hash"])
            groups[a["workflow_id"]] = (min(first, a["created_at"]), hashes)
        return cls([h for _, h in sorted(groups.values(), key=lambda g: g[0])])
