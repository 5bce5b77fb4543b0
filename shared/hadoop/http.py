"""Outbound HTTP to the cluster: one aiohttp session with aiohttp-retry.

Idempotent requests (GET, PUT, DELETE) are retried with exponential backoff on 5xx and
transport errors, and on the one 4xx that gets better: Hadoop answers a NameNode in
standby (``StandbyException``) or a transient refusal (``RetriableException``) with
HTTP 403 and that exception in the RemoteException body (docs/hadoop-protocol.md).
Other 4xx are never retried. POST is not retried
here: the Oozie client makes its submit idempotent through the external id instead.
"""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp_retry import ExponentialRetry, RetryClient

RETRIED_EXCEPTIONS = {aiohttp.ClientConnectionError, aiohttp.ServerDisconnectedError, asyncio.TimeoutError}
RETRIABLE_REMOTE = frozenset({"StandbyException", "RetriableException"})


async def settled(response: aiohttp.ClientResponse) -> bool:
    """False (retry) for a 403 whose RemoteException says the server may answer later."""
    if response.status != 403:
        return True
    try:
        body = await response.json(content_type=None)  # read once, kept for the caller
    except (ValueError, aiohttp.ClientError):
        return True
    remote = body.get("RemoteException") if isinstance(body, dict) else None
    return not (isinstance(remote, dict) and remote.get("exception") in RETRIABLE_REMOTE)


def retrying_client(attempts: int = 5, timeout: float = 30.0) -> RetryClient:
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout))
    options = ExponentialRetry(
        attempts=attempts, start_timeout=0.2, max_timeout=5.0, factor=2.0,
        statuses={502, 503, 504}, exceptions=RETRIED_EXCEPTIONS,
        methods={"GET", "PUT", "DELETE", "HEAD"}, retry_all_server_errors=True, evaluate_response_callback=settled,
    )  # fmt: skip
    return RetryClient(client_session=session, retry_options=options, raise_for_status=False)
