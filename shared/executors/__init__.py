"""Where actions run: the executor port (``base``) and its adapters (``local``; Oozie later).

Kept free of imports: the local job supervisor (``python -m shared.executors.local_job``)
starts once per action and must not pay for loading pydantic.
"""
