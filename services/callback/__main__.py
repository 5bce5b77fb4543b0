from services.callback.service import CallbackService
from shared.runtime import run_service

run_service(CallbackService)
