"""A client of the Oozie Web Services API (docs/hadoop-protocol.md, "Oozie").

Errors are read from the ``oozie-error-code`` / ``oozie-error-message`` headers, the real
error channel, and raised as ``OozieError``. Submission (POST) is made safe to repeat by
the external id: after a failed or unanswered POST the job is looked up before any retry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Literal

import aiohttp
from aiohttp_retry import RetryClient
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from shared.errors import PingoError, Refused
from shared.executors.base import JobRefused
from shared.hadoop.configuration import configuration_xml
from shared.hadoop.http import RETRIED_EXCEPTIONS, retrying_client

log = logging.getLogger(__name__)
TERMINAL = frozenset({"SUCCEEDED", "KILLED", "FAILED"})


class OozieError(PingoError):
    def __init__(self, status: int, code: str | None, message: str, what: str) -> None:
        self.status, self.code, self.message = status, code, message
        super().__init__(f"Oozie {what}: HTTP {status} {code or ''} {message}".replace("  ", " "))

    @staticmethod
    def of(status: int, code: str | None, message: str, what: str) -> OozieError:
        """The error of an answer: a refusal (401, 403) is an ``OozieRefused``."""
        return (OozieRefused if status in (401, 403) else OozieError)(status, code, message, what)

    @property
    def refusal(self) -> bool:
        return isinstance(self, Refused)


class OozieRefused(OozieError, JobRefused):
    """Final: Oozie refused who is asking (a proxy user it does not trust, E1400)."""


def _worth_retrying(error: BaseException) -> bool:
    """A server error or no answer (status 0): the job may or may not exist. A 4xx is final."""
    return isinstance(error, OozieError) and (error.status == 0 or error.status >= 500)


class Oozie:
    def __init__(self, base_url: str, user: str, client: RetryClient | None = None) -> None:
        self.base = base_url.rstrip("/")
        self.user = user
        self.client = client or retrying_client()
        self._v2: bool | None = None

    async def close(self) -> None:
        await self.client.close()

    @staticmethod
    async def _error(resp: aiohttp.ClientResponse, what: str) -> OozieError:
        code = resp.headers.get("oozie-error-code")
        message = resp.headers.get("oozie-error-message") or f"HTTP error code: {resp.status} {resp.reason or ''}"
        return OozieError.of(resp.status, code, message, what)

    async def _call(self, method: str, path: str, what: str, **kw: Any) -> Any:
        params = {"user.name": self.user, **kw.pop("params", {})}
        async with self.client.request(method, f"{self.base}{path}", params=params, **kw) as resp:
            if resp.status >= 400:
                raise await self._error(resp, what)
            text = await resp.text()
            return (await resp.json(content_type=None)) if text.strip() else None

    async def versions(self) -> list[int]:
        return await self._call("GET", "/versions", "versions")

    async def find(self, external_id: str) -> str | None:
        body = await self._call("GET", "/v1/jobs", "external-id lookup",
                                params={"external-id": external_id, "jobtype": "wf"})  # fmt: skip
        return body.get("id") or None

    async def submit(
        self, properties: dict[str, str], external_id: str, attempts: int = 5, do_as: str | None = None
    ) -> str:
        """POST /jobs?action=start, for ``do_as`` (the proxy-user mechanism: Pingo's identity
        acts for that user, who owns the job) when given. A 5xx or a lost answer may still have
        created the job, so the external id is looked up before trying again, and after the
        last try: never two jobs for one id. Backoff 0.2 s doubling to 5 s (tenacity)."""
        body = configuration_xml(properties)
        waits = wait_exponential(multiplier=0.2, max=5.0)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(attempts),
            wait=waits,
            retry=retry_if_exception(_worth_retrying),
            before_sleep=lambda state: log.warning(
                "submit of %s failed (%s); looking it up before retrying", external_id, state.outcome.exception()
            ),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if attempt.retry_state.attempt_number > 1 and (existing := await self._lookup(external_id)):
                        return existing
                    return await self._start(body, do_as)
        except OozieError as error:
            if not _worth_retrying(error):
                raise
            await asyncio.sleep(min(5.0, 0.2 * 2 ** (attempts - 1)))
            if existing := await self._lookup(external_id):
                return existing
            raise
        raise AssertionError("unreachable: tenacity returns or raises")

    async def _start(self, body: bytes, do_as: str | None = None) -> str:
        params = {"action": "start", "user.name": self.user, **({"doAs": do_as} if do_as else {})}
        try:
            async with self.client.post(
                f"{self.base}/v1/jobs",
                params=params,
                data=body,
                headers={"Content-Type": "application/xml;charset=UTF-8"},
            ) as resp:
                if resp.status == 201:
                    return (await resp.json(content_type=None))["id"]
                raise await self._error(resp, "submit")
        except tuple(RETRIED_EXCEPTIONS) as exc:
            raise OozieError(0, None, f"transport error: {exc!r}", "submit") from exc

    async def _lookup(self, external_id: str) -> str | None:
        """The job a failed submission may have created; None if none or Oozie cannot say."""
        try:
            return await self.find(external_id)
        except (OozieError, *RETRIED_EXCEPTIONS):
            return None

    async def status(self, job_id: str) -> str:
        if self._v2 is None:
            self._v2 = 2 in await self.versions()
        if self._v2:
            return (await self._call("GET", f"/v2/job/{job_id}", "status", params={"show": "status"}))["status"]
        return (await self.info(job_id))["status"]

    async def info(self, job_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/v1/job/{job_id}", "info", params={"show": "info"})

    async def log(self, job_id: str, show: Literal["log", "errorlog"], chunk: int = 64 * 1024) -> AsyncIterator[bytes]:
        """The job's log (``show=log``) or its error lines (``show=errorlog``, v2), streamed
        as Oozie writes it (text/plain). An unknown or purged job raises E0604."""
        version = "v2" if show == "errorlog" else "v1"
        async with self.client.get(
            f"{self.base}/{version}/job/{job_id}", params={"show": show, "user.name": self.user}
        ) as resp:
            if resp.status >= 400:
                raise await self._error(resp, show)
            async for data in resp.content.iter_chunked(chunk):
                yield data

    async def kill(self, job_id: str) -> None:
        # A 200 does not prove anything changed (silent no-ops): callers re-read the status.
        await self._call("PUT", f"/v2/job/{job_id}", "kill", params={"action": "kill"}, data=b"")
