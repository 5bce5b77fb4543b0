#!/usr/bin/env python3
"""``hdfs_synth.py LABEL [INPUT_DIR ...] OUTPUT_DIR``: examples/jobs/synth.py for a real
cluster, where a shell action's paths are HDFS paths and no Hadoop client is installed in
the container. It reads each input's part-00000 and writes OUTPUT_DIR/part-00000 and
OUTPUT_DIR/_lineage over WebHDFS (``PINGO_JOB_WEBHDFS``, a configuration parameter), as
the container's user (YARN sets ``USER`` to the application's). ``SYNTH_SECONDS`` in its
environment: how long it works before writing (a job long enough to be killed);
``SYNTH_FAIL_ONCE``, an HDFS path: the job fails (exit 1) if nothing is there yet, after
writing it (a job that succeeds when tried again)."""

import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def hdfs_path(path: str) -> str:
    """``hdfs://nn:8020/a/b`` or ``/a/b`` -> ``/a/b``."""
    if path.startswith("hdfs://"):
        return "/" + path.split("/", 3)[3]
    return path


def url(path: str, op: str, **params: str) -> str:
    query = urllib.parse.urlencode({"op": op, "user.name": os.environ.get("USER", "pingo"), **params})
    return f"{os.environ['PINGO_JOB_WEBHDFS']}/webhdfs/v1{hdfs_path(path)}?{query}"


class _Keep(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # the 307 to the DataNode is read, not followed
        return None


def create(path: str, data: bytes) -> None:
    try:
        urllib.request.build_opener(_Keep).open(
            urllib.request.Request(url(path, "CREATE", overwrite="true"), method="PUT")
        )
        raise SystemExit(f"CREATE {path} did not redirect")
    except urllib.error.HTTPError as redirect:
        if redirect.code != 307:
            raise
        location = redirect.headers["Location"]
    with urllib.request.urlopen(urllib.request.Request(location, data=data, method="PUT"), timeout=60):
        pass


def exists(path: str) -> bool:
    try:
        with urllib.request.urlopen(url(path, "GETFILESTATUS"), timeout=60):
            return True
    except urllib.error.HTTPError as error:
        if error.code != 404:
            raise
        return False


def main(argv: list[str]) -> int:
    label, inputs, output = argv[0], argv[1:-1], argv[-1]
    marker = os.environ.get("SYNTH_FAIL_ONCE")
    if marker and not exists(marker):
        create(marker, b"failed\n")
        print(f"hdfs_synth {label}: failing once on purpose", file=sys.stderr, flush=True)
        return 1
    time.sleep(float(os.environ.get("SYNTH_SECONDS", "0")))
    digest = hashlib.sha256(label.encode())
    for d in inputs:
        with urllib.request.urlopen(url(f"{hdfs_path(d)}/part-00000", "OPEN"), timeout=60) as r:
            digest.update(r.read())
    with urllib.request.urlopen(urllib.request.Request(url(output, "MKDIRS"), method="PUT"), timeout=60) as r:
        assert json.load(r)["boolean"]
    create(f"{hdfs_path(output)}/part-00000", (digest.hexdigest() + "\n").encode() * 64)
    create(f"{hdfs_path(output)}/_lineage", ("\n".join([label, *map(hdfs_path, inputs)]) + "\n").encode())
    print(f"hdfs_synth {label}: read {len(inputs)} input(s), wrote {output}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
