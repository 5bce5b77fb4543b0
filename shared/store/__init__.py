from shared.store.client import Store, connect

__all__ = ["Store", "connect"]
