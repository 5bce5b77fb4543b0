"""Eviction algorithms (the thesis's decision algorithms, sections 3.7-3.8): what to delete so that future workflows
lose the least recomputation time. Registered by name; chosen by ``PINGO_ALGORITHM``."""

from shared.eviction.algorithms import REGISTRY, Algorithm, get_algorithm
from shared.eviction.workload import Candidate, Workload

__all__ = ["REGISTRY", "Algorithm", "Candidate", "Workload", "get_algorithm"]
