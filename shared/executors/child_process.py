"""A job's process as the local job runner holds it: started with fork/exec, awaited
through a pidfd (docs/performance.md, "A chain's hop").

asyncio's own subprocesses are awaited, on Python 3.11, by a thread per process blocked
in ``waitpid`` that then wakes the event loop; on a busy machine that hand-over is a
good part of a millisecond at both ends of every job. A pidfd (Linux 5.3 and later)
becomes readable when its process exits, so the event loop sees the end itself. Where
there is none, a thread waits as before.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Sequence
from typing import Any


class Child:
    def __init__(self, argv: Sequence[str], **popen: Any) -> None:
        # The runner's own loop makes no asyncio subprocess, so nothing else reaps it.
        self.popen = subprocess.Popen(list(argv), **popen)
        self.pid = self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def terminate(self) -> None:
        self.popen.terminate()

    def kill(self) -> None:
        self.popen.kill()

    async def wait(self) -> int:
        """Its exit code, once it has exited (reaped here)."""
        if self.popen.returncode is not None:
            return self.popen.returncode
        try:
            fd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # no pidfd here (not Linux, or a kernel before 5.3)
            return await asyncio.to_thread(self.popen.wait)
        loop = asyncio.get_running_loop()
        exited = loop.create_future()
        loop.add_reader(fd, lambda: exited.done() or exited.set_result(None))
        try:
            await exited
        finally:
            loop.remove_reader(fd)
            os.close(fd)
        return self.popen.wait()
