from shared.config import Settings
from shared.executors.base import Executor


def make_executor(settings: Settings) -> Executor:
    from shared.executors.local import LocalExecutor

    return LocalExecutor(settings.jobs_dir, slots=settings.local_slots)
