"""Decision algorithms (thesis sections 3.7-3.8): what to delete so that future workflows
lose the least recomputation time. Registered by name; chosen by ``PINGO_ALGORITHM``."""

from shared.decision.algorithms import REGISTRY, Algorithm, get_algorithm
from shared.decision.history import Candidate, SimplifiedHistory

__all__ = ["REGISTRY", "Algorithm", "Candidate", "SimplifiedHistory", "get_algorithm"]
