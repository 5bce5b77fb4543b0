"""Where actions run: the executor port (``base``) and its adapters (``local``, ``oozie``).

Kept free of imports: the local job runner (``python -m shared.executors.local_runner``)
and the fallback per-job supervisor (``local_job``) are started as processes of their
own and must not pay for loading pydantic.
"""
