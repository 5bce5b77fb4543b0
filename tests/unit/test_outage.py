"""The reconcile sweep's safety stop (docs/planning.md, "The safety stop"): where losses
end and an outage begins."""

from __future__ import annotations

import pytest

from shared.storage.outage import SweepFindings, outage


@pytest.mark.parametrize(
    "checked, failed, under_root, root_missing, held",
    [
        (9, 9, 9, False, False),  # a few, even all of a small catalogue: losses
        (10, 10, 10, False, True),  # 10 at once, all of them: an outage
        (20, 10, 10, False, True),  # 10, half of those checked
        (21, 10, 10, False, False),  # 10, under half
        (1000, 400, 400, False, False),  # a large catalogue's few hundred: losses
        (1000, 600, 600, False, True),
        (3, 1, 1, True, True),  # the managed root itself gone
        (3, 1, 0, True, False),  # ...but nothing recorded under it is missing
    ],
)
def test_the_rule(checked: int, failed: int, under_root: int, root_missing: bool, held: bool) -> None:
    assert (outage(SweepFindings(checked, failed, under_root, root_missing)) is not None) == held
