from services.decision.service import DecisionService
from shared.runtime import run_service

run_service(DecisionService)
