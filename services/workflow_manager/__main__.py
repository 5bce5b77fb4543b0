from services.workflow_manager.service import WorkflowManager
from shared.runtime import run_service

run_service(WorkflowManager)
