from services.dataset_manager.service import DatasetManager
from shared.runtime import run_service

run_service(DatasetManager)
