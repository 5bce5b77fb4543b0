"""Evaluation of the decision algorithms (thesis chapter 4): a workflow-history generator,
a simulator that replays a history through the production planner and decision
algorithms under a storage budget, the thesis's ideal time, the experiments and plots of
section 4.2, and a what-if replay of an installation's recorded history."""
