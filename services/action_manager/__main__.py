from services.action_manager.service import ActionManager
from shared.runtime import run_service

run_service(ActionManager)
