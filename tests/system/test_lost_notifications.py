"""100 % of notifications lost: every workflow still completes, by polling."""

from __future__ import annotations

import time
from pathlib import Path

import aiohttp
import pytest

from tests.support.net import free_port
from tests.support.system import Api, make_settings
from tests.support.workflows import diamond
from tests.system.test_callbacks import callback


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str):
    # Notifications go to a port where nothing listens: every one of them is lost.
    return make_settings(tmp_path, mongo_url, callback_base_url=f"http://127.0.0.1:{free_port()}")


async def test_every_notification_lost_still_completes_by_polling(system: Api) -> None:
    t0 = time.time()
    wf = await system.run(diamond("cb-lost"), timeout=60)
    assert wf["state"] == "SUCCEEDED"
    assert all(a["state"] == "FINISHED" for a in wf["actions"])
    # Nothing reached the callback endpoint: the completions were found by the poller.
    assert system.http is not None
    with pytest.raises(aiohttp.ClientConnectionError):
        await callback(system, wf["actions"][0]["id"], secret="x")
    assert time.time() - t0 < 60
