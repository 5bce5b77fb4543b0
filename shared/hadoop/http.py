"""Outbound HTTP to the cluster: one aiohttp session with aiohttp-retry.

Idempotent requests (GET, PUT, DELETE) are retried with exponential backoff on 5xx and
transport errors; 4xx are never retried (they will not get better). POST is not retried
here: the Oozie client makes its submit idempotent through the external id instead.
"""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp_retry import ExponentialRetry, RetryClient

RETRIED_EXCEPTIONS = {aiohttp.ClientConnectionError, aiohttp.ServerDisconnectedError, asyncio.TimeoutError}


def retrying_client(attempts: int = 5, timeout: float = 30.0) -> RetryClient:
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout))
    options = ExponentialRetry(
        attempts=attempts, start_timeout=0.2, max_timeout=5.0, factor=2.0,
        statuses={502, 503, 504}, exceptions=RETRIED_EXCEPTIONS,
        methods={"GET", "PUT", "DELETE", "HEAD"}, retry_all_server_errors=True,
    )  # fmt: skip
    return RetryClient(client_session=session, retry_options=options, raise_for_status=False)
