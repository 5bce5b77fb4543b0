"""A gate a synth job waits at (``SYNTH_WAIT_FOR``, examples/jobs/synth.py): the test holds
the job running for as long as its steps take, then opens the gate.

A job that merely lasts a few seconds leaves a window a loaded machine can close: a local
job reads RUNNING only once it has run a second (the job runner's start notice,
docs/performance.md "The job runner"), and a test's requests meanwhile may take seconds
on a busy 2-core box. A gate leaves none: the state the test watched lasts until it says."""

from __future__ import annotations

from pathlib import Path


class Gate:
    """A file that does not exist until ``open``; the jobs given ``env`` wait for it. A job
    in the local sandbox (users on) cannot see it: its ``/tmp`` is its own
    (docs/users.md, "What a job can reach")."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def env(self) -> dict[str, str]:
        """What a synth job's configuration (its environment) carries to wait at this gate."""
        return {"SYNTH_WAIT_FOR": str(self.path)}

    @property
    def conf(self) -> list[dict[str, str]]:
        """``env`` as an action's configurationParameters."""
        return [{"key": k, "value": v} for k, v in self.env.items()]

    def open(self) -> None:
        self.path.touch()
