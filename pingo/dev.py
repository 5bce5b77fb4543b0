"""All five services in one process, for a laptop (``pingo dev``) and the demo."""

from __future__ import annotations

from services.action_manager.service import ActionManager
from services.callback.service import CallbackService
from services.dataset_manager.service import DatasetManager
from services.decision.service import DecisionService
from services.workflow_manager.service import WorkflowManager
from shared.runtime import Context

SERVICES = {
    "workflow_manager": WorkflowManager,
    "action_manager": ActionManager,
    "callback": CallbackService,
    "dataset_manager": DatasetManager,
    "decision": DecisionService,
}


def all_services(ctx: Context) -> list:
    return [cls(ctx) for cls in SERVICES.values()]
