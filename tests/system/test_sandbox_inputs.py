"""External inputs with users on and jobs in the sandbox (docs/users.md, "Paths"): a
user's input in her own output root is fingerprinted and given to her sandboxed job; the
same path named by another user is never looked at."""

from __future__ import annotations

from pathlib import Path

from tests.support.workflows import shell_action
from tests.system.test_job_sandbox import alice_and_bob, base

__all__ = ["base"]  # the fixture, used by name


async def test_a_users_own_input_reaches_her_sandboxed_job_and_no_one_else(base: Path) -> None:
    async with alice_and_bob(base) as (_, _ctx, alice, bob):
        corpus = base / "home" / "alice" / "corpus"
        corpus.mkdir(parents=True)
        (corpus / "part-00000").write_text("alice's words")
        reader = shell_action(1, "alice-reads")
        reader["additionalInput"].append({"value": str(corpus)})
        wf = await alice.run({"name": "reads", "actions": [reader]})
        assert wf["state"] == "SUCCEEDED", wf["actions"][0].get("error")
        assert wf["actions"][0]["inputs"][0]["fingerprint"]["size"] == len("alice's words")

        theirs = shell_action(1, "bob-reads")
        theirs["additionalInput"].append({"value": str(corpus)})
        code, plan = await bob.request("POST", "/api/v1/workflows?dryRun=true", json={"name": "r", "actions": [theirs]})
        assert code == 200 and plan["actions"][0]["inputs"] == []  # a plain value: nothing learnt
        theirs["additionalInput"][-1]["input"] = True
        answers = []
        for path in (str(corpus), str(corpus) + "-missing"):  # the same answer, existing or not
            theirs["additionalInput"][-1]["value"] = path
            code, out = await bob.request("POST", "/api/v1/workflows", json={"name": "r", "actions": [theirs]})
            assert code == 422 and "must be inside" in out["violations"][0]["message"], out
            answers.append(out["violations"][0]["message"].replace(path, "PATH"))
        assert answers[0] == answers[1]
