"""Pingo's configuration: one pydantic settings model, read from ``PINGO_*`` variables.

With nothing set, every service runs on the embedded defaults: an ``nx-27017``
MongoDB-compatible server under the data directory, the in-process bus, the local
executor and the local filesystem.
"""

from __future__ import annotations

import json
import posixpath
import re
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from shared.sizes import Bytes

USER_SLOT = "{user}"  # in an output root: the submitting user's name
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PINGO_", env_nested_delimiter="__", extra="ignore")

    data_dir: Path = Field(Path(".pingo"), description="Where embedded MongoDB data, datasets and local jobs live.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="Least severe log lines written: DEBUG, INFO, WARNING or ERROR (any case)."
    )
    log_format: Literal["text", "json"] = Field(
        "text", description="Log lines as text for people, or json: one object per line (docs/operations.md)."
    )

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:
        # A known value in any case; an unknown one as given, so the error quotes it.
        if isinstance(value, str):
            for known in (*LEVELS, "text", "json"):
                if value.strip().lower() == known.lower():
                    return known
        return value

    mongo_url: str | None = Field(None, description="MongoDB URL; unset starts the embedded nx-27017 server.")
    mongo_db: str = Field("pingo", description="Database name.")
    store_timeout: float = Field(
        10.0,
        gt=0,
        description="How long a service waits for a MongoDB it cannot reach before the operation fails (the loop "
        "retries it on its timer), seconds.",
    )

    amqp_url: str | None = Field(None, description="RabbitMQ URL; unset uses the in-process bus.")
    exchange: str = Field("pingo.events", description="RabbitMQ topic exchange; queues are <exchange>.<service>.")

    host: str = Field("127.0.0.1", description="Gateway bind address.")
    port: int = Field(8080, description="Gateway (workflow manager) HTTP port.")
    callback_host: str = Field("127.0.0.1", description="Callback service bind address.")
    callback_port: int = Field(8081, description="Callback service HTTP port.")
    metrics_host: str = Field("127.0.0.1", description="Bind address of /metrics, /healthz and /readyz.")
    metrics_port: int | None = Field(
        None, description="Port of /metrics, /healthz and /readyz (one per process); unset serves none."
    )
    callback_base_url: str | None = Field(
        None, description="URL executors call back on; default http://<callback_host>:<callback_port>."
    )
    callback_key: SecretStr | None = Field(
        None,
        description="The key the callback URL's token is signed with, shared by every service (docs/architecture.md, "
        '"callback"); default: one made at random once and kept in the catalogue.',
    )
    max_body_bytes: Bytes = Field(
        1_048_576, description="Largest workflow submission accepted (413 above): bytes, or with a unit (1MiB)."
    )
    idempotency_seconds: float = Field(
        86_400.0,
        gt=0,
        description="How long an Idempotency-Key of a submission is remembered (docs/api.md): a retry within it "
        "answers the workflow the first request made, seconds.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names the gateway answers to (400 otherwise; against DNS rebinding); "
        '"*" any, ".example.org" it and its subdomains. Default: localhost, 127.0.0.1, ::1 and '
        "PINGO_HOST unless it is 0.0.0.0 or ::.",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Web origins (scheme://host[:port]) that may call the gateway from a browser; "
        "other cross-origin requests get 403. Default: none (CORS off).",
    )
    auth: Literal["auto", "required", "off"] = Field(
        "auto",
        description="Who may call the gateway (docs/users.md). auto: anyone while no user exists and no OIDC "
        "issuer is set, then only with a token; required: only with a token, even before the first user; off: "
        "anyone (a single-user tool: refused on a non-loopback PINGO_HOST).",
    )
    auth_cache_seconds: float = Field(
        2.0,
        ge=0,
        description="How long a replica trusts what it read of users and tokens: a revocation takes effect "
        "everywhere within this many seconds.",
    )
    oidc_issuer: str | None = Field(
        None, description="OIDC issuer URL: its JWTs are accepted as credentials (verified against its JWKS)."
    )
    oidc_audience: str | None = Field(None, description="The audience (aud) a JWT must name; required with an issuer.")
    oidc_jwks_url: str | None = Field(
        None, description="The issuer's key set; default: jwks_uri of <issuer>/.well-known/openid-configuration."
    )
    oidc_user_claim: str = Field("preferred_username", description="The JWT claim holding the Pingo user name.")
    oidc_groups_claim: str = Field("groups", description="The JWT claim listing the user's groups.")
    oidc_admin_group: str | None = Field(None, description="Members of this group (in the groups claim) are admins.")
    oidc_algorithms: list[str] = Field(
        default_factory=lambda: ["RS256", "ES256"], description="JWT signature algorithms accepted."
    )
    body_timeout: float = Field(30.0, gt=0, description="Seconds a client has to send a request body (408 after).")
    header_timeout: float = Field(
        20.0,
        gt=0,
        description="Seconds a connection to the gateway or the callback service may take to send a whole request "
        "line and headers, or stay idle between requests, before it is closed (against slowloris).",
    )
    max_connections: int | None = Field(
        None,
        ge=1,
        description="Connections a process's HTTP servers (gateway, callback service) hold at once; one more is "
        "answered 503 with Retry-After and closed. Default: half the process's open-file limit (ulimit -n), at most "
        "10000.",
    )
    request_store_timeout: float = Field(
        3.0, gt=0, description="How long a gateway GET waits for a MongoDB it cannot reach, seconds (then 503)."
    )
    request_timeout: float = Field(
        30.0, gt=0, description="Longest a gateway GET may spend on a slow MongoDB, seconds (then 503)."
    )

    executor: Literal["local", "oozie"] = Field("local", description="Where actions run: local or oozie.")
    storage: Literal["local", "webhdfs"] = Field("local", description="Where datasets live: local or webhdfs.")
    oozie_url: str = Field("http://127.0.0.1:11000/oozie", description="Oozie base URL (executor oozie).")
    webhdfs_url: str = Field("http://127.0.0.1:9870", description="NameNode HTTP address (storage webhdfs).")
    hdfs_user: str = Field("pingo", description="The user Pingo acts as on Oozie and HDFS (user.name).")
    name_node: str = Field("hdfs://127.0.0.1:8020", description="NameNode RPC URI, for Oozie application paths.")
    job_tracker: str = Field("127.0.0.1:8032", description="ResourceManager address given to Oozie actions.")
    queue_name: str = Field("default", description="YARN queue of the actions.")
    hdfs_root: str = Field("/pingo", description="On HDFS: datasets/, outputs/, actions/ and oozie-apps/ under it.")
    managed_root: Path | None = Field(None, description="Managed datasets root; default <data_dir>/datasets.")
    output_roots: list[Path] = Field(
        default_factory=list,
        description="Where unmanaged outputs may go; default <data_dir>/outputs. {user} in a root stands for the "
        "submitting user (/user/{user}/out): such a root is closed while users are off.",
    )
    action_roots: list[Path] = Field(
        default_factory=list, description="Where actionFolder may point; default the working directory."
    )
    fanout_max_files: int = Field(
        1000,
        ge=1,
        description='Most files an action\'s "forEach": {"files": PATTERN} may match; more is a 422 '
        '(docs/planning.md, "Fan-out over files").',
    )
    local_slots: int = Field(4, description="Local executor: actions running at once on this machine.")
    job_sandbox: Literal["auto", "bwrap", "off"] = Field(
        "auto",
        description="Local executor: the sandbox jobs run in (docs/users.md, 'What a job can reach'). auto: the "
        "jobs of users (users on) run in bubblewrap where bwrap works; bwrap: every job, and a process refuses to "
        "start where bwrap does not work; off: none (then a gateway with more than one user stays on loopback).",
    )
    job_network: bool = Field(
        False,
        description="Local executor: sandboxed jobs share this machine's network (the store's and the broker's "
        "TCP ports included); default: a network of their own with only a loopback.",
    )
    job_env_pass: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Local executor: names of variables of Pingo's environment that jobs get besides the "
        'allow-list (docs/planning.md, "The job\'s environment"), comma-separated: PINGO_JOB_ENV_PASS=CUDA_HOME,'
        "KRB5CCNAME. A name ending in * passes every variable it starts. Pingo's own PINGO_* never pass.",
    )

    @field_validator("job_env_pass", mode="before")
    @classmethod
    def _names(cls, value: object) -> object:
        if isinstance(value, str):
            # Comma-separated, as documented; a JSON list as every other list setting.
            text = value.strip()
            value = json.loads(text) if text.startswith("[") else [n.strip() for n in text.split(",") if n.strip()]
        if isinstance(value, list):
            for name in value:
                if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\*?", name):
                    raise ValueError(f"PINGO_JOB_ENV_PASS: {name!r} is not a variable name (or a prefix ending in *)")
                if name.upper().startswith("PINGO"):
                    raise ValueError(f"PINGO_JOB_ENV_PASS: {name!r}: Pingo's own settings never reach a job")
        return value

    webhooks: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="URLs called with the workflow.finished event when any workflow ends, comma-separated "
        "(docs/webhooks.md); signed with PINGO_WEBHOOK_SECRET.",
    )
    webhook_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description='Hosts a workflow\'s own "webhooks" may call, comma-separated: "hooks.example.org" (any port), '
        '"hooks.example.org:8443", ".example.org" (it and its subdomains). Default: none (a workflow\'s webhooks are '
        "refused: they could reach internal services).",
    )
    webhook_secret: SecretStr | None = Field(
        None,
        description="The shared secret webhook deliveries are signed with (Standard Webhooks, whsec_<base64>); "
        "required with PINGO_WEBHOOKS or PINGO_WEBHOOK_HOSTS.",
    )
    webhook_attempts: int = Field(
        10, ge=1, le=100, description="Attempts of one webhook delivery before it is given up."
    )
    webhook_retry_seconds: float = Field(
        5.0, gt=0, description="Wait before a webhook delivery's second attempt; each later wait doubles, up to 1 h."
    )
    webhook_timeout: float = Field(10.0, gt=0, description="Seconds a webhook receiver has to answer one attempt.")

    @field_validator("webhooks", "webhook_hosts", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            return json.loads(text) if text.startswith("[") else [n.strip() for n in text.split(",") if n.strip()]
        return value

    @model_validator(mode="after")
    def _webhooks_signed(self) -> Settings:
        from shared.webhooks.signing import secret_problem  # the library that signs is the one that checks

        if (self.webhooks or self.webhook_hosts) and self.webhook_secret is None:
            raise ValueError("PINGO_WEBHOOKS and PINGO_WEBHOOK_HOSTS need PINGO_WEBHOOK_SECRET: deliveries are signed")
        if self.webhook_secret is not None and (problem := secret_problem(self.webhook_secret.get_secret_value())):
            raise ValueError(f"PINGO_WEBHOOK_SECRET: {problem}")
        from shared.webhooks.urls import url_problem

        for url in self.webhooks:
            if problem := url_problem(url):
                raise ValueError(f"PINGO_WEBHOOKS: {problem}")
        return self

    spark_master: str | None = Field(
        None, description="SPARK actions' --master; default local[2] (local executor), yarn (Oozie)."
    )
    sqoop_classpath: str | None = Field(
        None,
        description="SQOOP actions' Java class path on the local executor: Sqoop 1.4.7's jars, the JDBC drivers "
        "and Hadoop's, joined by ':' (`pingo sqoop-classpath` prints it; docs/planning.md, \"SQOOP actions\").",
    )

    scrape_interval: float = Field(5.0, description="Fallback timer of the scrapers, seconds.")
    stale_after: float = Field(60.0, description="PROCESSING older than this is taken again, seconds.")
    submit_retry_ceiling: int = Field(3, description="Submit errors before an action is FAILED.")
    takeover_retries: int = Field(
        1,
        ge=0,
        description="A computation that failed is taken over by one of its followers at most this often; "
        "then its followers fail (upstream_failed).",
    )
    submitters: int = Field(4, ge=0, description="Submitter tasks per action manager (0: claim only).")
    deletors: int = Field(4, ge=1, description="Deletor tasks per dataset manager.")
    queue_size: int = Field(64, description="Bounded queue between a scraper and its workers.")
    poll_interval: float = Field(2.0, description="First poll of a SUBMITTED/RUNNING action, seconds.")
    poll_max_interval: float = Field(30.0, description="Longest gap between two polls of one action, seconds.")
    settle_interval: float = Field(10.0, description="Repair sweeps (stuck WAITING, unsettled workflows), seconds.")

    capacity_bytes: Bytes = Field(
        10 * 1024**3, description="Budget for managed intermediate datasets: bytes, or with a unit (10GiB, 500GB)."
    )
    budget_reservations: bool = Field(
        True,
        description="Reserve an attempt's expected output in the budget before it starts, holding it READY "
        "while there is no room (docs/operations.md, 'Storage budget'); false: the thesis's decision service alone.",
    )
    threshold: float = Field(0.9, description="Decision runs when usage passes threshold x capacity.")
    target: float = Field(0.8, description="...and frees until usage is under target x capacity.")
    algorithm: str = Field("adaptive", description="Decision algorithm: adaptive, mcu, lru, gdsf, nectar, reuse-rate.")
    history_window: int = Field(10_000, description="Actions in the decision's rolling window.")
    decision_interval: float = Field(10.0, description="Decision timer (it also wakes on dataset.stored), seconds.")
    decision_lease: float = Field(
        30.0,
        gt=0,
        description="How long the deciding replica's turn lasts unless renewed, seconds (at least 3 decision "
        "intervals): a standby decides once the holder has been silent this long.",
    )
    fault_crash_after_submit: bool = Field(
        False,
        description="Fault injection for tests: the action manager exits right after the executor accepted "
        "a job, before recording it (the crash window that external-id lookups close).",
    )
    orphan_sweep_interval: float = Field(300.0, description="Removal of unowned files under the managed root, seconds.")
    expiry_interval: float = Field(
        60.0,
        gt=0,
        description="Expiry sweep of the dataset manager: datasets past their expiresAt, nothing needing them, are "
        "deleted; the retention of final outputs is applied, seconds.",
    )
    leaf_retention_days: float = Field(
        0.0,
        ge=0,
        description="Retention of final outputs: a LEAF dataset unused for this many days (and not pinned) becomes "
        "an ordinary STORED dataset, counted against the capacity and evictable; 0 (the default) keeps leaves "
        "forever.",
    )
    verify_reuse: Literal["none", "exists", "size", "checksum"] = Field(
        "size",
        description="What is checked of a stored dataset before it is reused, and by the reconcile sweep: none "
        "(trust the catalogue; the sweep still checks existence), exists, size (and existence), checksum "
        "(size, file count and content checksum recorded at commit; reads every byte locally).",
    )
    input_roots: list[str] = Field(
        default_factory=list,
        description="Where an additionalInput value may name an external input that is fingerprinted into the "
        "lineage hash; default the action roots and the submitting user's output roots. {user} stands for the "
        "submitting user. A path outside is never looked at (docs/planning.md, 'External inputs').",
    )
    input_fingerprint: Literal["stat", "checksum"] = Field(
        "stat",
        description="How an external input is fingerprinted: stat (size and modification time: locally in "
        "nanoseconds, on HDFS its modificationTime) or checksum (content: SHA-256 locally, GETFILECHECKSUM on HDFS).",
    )
    input_max_files: int = Field(
        10_000, gt=0, description="Files an input folder may hold for its fingerprint; past it the workflow is refused."
    )
    reconcile_interval: float = Field(
        300.0, gt=0, description="Reconcile sweep: STORED and LEAF datasets whose files are gone become LOST, seconds."
    )
    job_retention: float = Field(
        7 * 86_400.0,
        ge=0,
        description="How long the folder of a local job (its request, status and logs) is kept after the job "
        "ended, seconds; 0 keeps them forever. Pruned by the action manager every quarter of it (at most hourly).",
    )

    @model_validator(mode="after")
    def _executor_matches_storage(self) -> Settings:
        if (self.executor == "oozie") != (self.storage == "webhdfs"):
            raise ValueError("PINGO_EXECUTOR=oozie goes with PINGO_STORAGE=webhdfs (and local with local)")
        return self

    @model_validator(mode="after")
    def _oidc_complete(self) -> Settings:
        if self.oidc_issuer and not self.oidc_audience:
            raise ValueError("PINGO_OIDC_ISSUER needs PINGO_OIDC_AUDIENCE (the aud a token must name)")
        return self

    @property
    def on_hdfs(self) -> bool:
        return self.storage == "webhdfs"

    @cached_property
    def managed_dir(self) -> Path:
        return (self.managed_root or self.data_dir / "datasets").resolve()

    @cached_property
    def allowed_output_roots(self) -> list[Path]:
        return [p.resolve() for p in (self.output_roots or [self.data_dir / "outputs"])]

    @cached_property
    def allowed_action_roots(self) -> list[Path]:
        return [p.resolve() for p in (self.action_roots or [Path.cwd()])]

    def managed_path(self) -> str:
        """The managed root in the storage's namespace."""
        if self.on_hdfs:
            return str(self.managed_root) if self.managed_root else posixpath.join(self.hdfs_root, "datasets")
        return str(self.managed_dir)

    def output_root_list(self, user: str | None = None) -> list[str]:
        """The output roots open to ``user``: ``{user}`` filled in; a root with ``{user}``
        is open to nobody when there is no user (users off)."""
        if self.on_hdfs:
            roots = [str(p) for p in self.output_roots] or [posixpath.join(self.hdfs_root, "outputs")]
        else:
            roots = [str(p) for p in self.allowed_output_roots]
        if user is None:
            return [r for r in roots if USER_SLOT not in r]
        return [r.replace(USER_SLOT, user) for r in roots]

    def input_root_list(self, user: str | None = None) -> list[str]:
        """Where ``user`` may name external inputs: ``PINGO_INPUT_ROOTS`` (``{user}`` filled
        in, closed while users are off), else what they may already name: the action roots
        and their own output roots."""
        if not self.input_roots:
            return [*self.action_root_list(), *self.output_root_list(user)]
        roots = self.input_roots if self.on_hdfs else [str(Path(r).resolve()) for r in self.input_roots]
        if user is None:
            return [r for r in roots if USER_SLOT not in r]
        return [r.replace(USER_SLOT, user) for r in roots]

    def action_root_list(self) -> list[str]:
        if self.on_hdfs:
            return [str(p) for p in self.action_roots] or [posixpath.join(self.hdfs_root, "actions")]
        return [str(p) for p in self.allowed_action_roots]

    @property
    def callback_url(self) -> str:
        return self.callback_base_url or f"http://{self.callback_host}:{self.callback_port}"

    @property
    def jobs_dir(self) -> Path:
        return (self.data_dir / "local-jobs").resolve()
