"""Pingo's Prometheus metrics, defined once, with the official client (``prometheus_client``).

They live in the client's default registry: ``pingo dev`` runs the five services in one
process, so one registry (and one ``/metrics``) covers them all. Each metric is counted at
the one place every writer goes through (docs/operations.md lists them).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram
from pymongo import monitoring

TRANSITIONS = Counter(
    "pingo_transitions_total",
    "State changes written through the guarded writer, by collection and states.",
    ["entity", "source", "target"],
)

STORE_SECONDS = Histogram(
    "pingo_store_operation_seconds",
    "Latency of MongoDB commands as PyMongo sees them, by command name.",
    ["command"],
    # Store commands run from well under a millisecond (indexed lookups) to seconds (outage).
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
)

REUSE_HITS = Counter(
    "pingo_reuse_hits_total", "Actions planned as REUSED: their output was already stored (or being computed)."
)
SAVED_SECONDS = Counter(
    "pingo_reuse_saved_seconds_total",
    "Compute seconds the reused and skipped actions would have taken (their mean past run time).",
)

CALLBACKS = Counter(
    "pingo_callbacks_total",
    "Job-end callbacks received: accepted (then confirmed by polling the job) or refused (unknown or wrong secret).",
    ["outcome"],
)
CALLBACK_BATCHES = Counter(
    "pingo_callback_batches_total",
    "Batches of job notifications received (POST /callback-batch, a job runner's ends that came together): "
    "accepted (each entry then checked as its GET is) or refused (a body too big or malformed).",
    ["outcome"],
)
WEBHOOK_ATTEMPTS = Counter(
    "pingo_webhook_attempts_total",
    "Attempts of webhook deliveries (docs/webhooks.md): delivered (a 2xx), retrying (failed, another is due) or "
    "gave_up (the last attempt failed).",
    ["outcome"],
)
POLL_LAG = Histogram(
    "pingo_poll_lag_seconds",
    "How late a running action was polled after its next_poll_at came due.",
    buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)

SUBMIT_ERRORS = Counter(
    "pingo_submit_errors_total", "Submissions of a job to the executor that failed (the action retries, then fails)."
)
READY_TO_SUBMIT = Histogram(
    "pingo_ready_to_submit_seconds",
    "From an action turning READY (its last parent ended; planned, for a root; a retry) to its job's submission.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)
QUEUE_DEPTH = Gauge(
    "pingo_scraper_queue_depth", "Claimed READY actions waiting in the action manager's queue for a submitter."
)

DECISION_RUNS = Counter(
    "pingo_decision_runs_total",
    "Storage decisions run by the lease holder: under the threshold (nothing to do) or over it (datasets marked).",
    ["outcome"],
)
USED_BYTES = Gauge(
    "pingo_storage_used_bytes", "Bytes of STORED managed datasets, as the decision service last counted."
)
CAPACITY_BYTES = Gauge("pingo_storage_capacity_bytes", "The managed storage capacity (PINGO_CAPACITY_BYTES).")
THRESHOLD_BYTES = Gauge(
    "pingo_storage_threshold_bytes", "Usage past which a decision frees storage: PINGO_THRESHOLD x capacity."
)
RECONCILE_HELD = Gauge(
    "pingo_reconcile_held",
    "1 while the reconcile sweep holds back: its last run found an implausible share of datasets missing at once "
    "(the storage looks unmounted or wrong, docs/planning.md) and marked none LOST; 0 after a run that did not.",
)
RECONCILE_HOLDS = Counter(
    "pingo_reconcile_holds_total", "Reconcile sweeps that found an outage rather than losses, and marked nothing."
)
ACTIONS = Gauge(
    "pingo_actions",
    "Actions in each live state (counted up to 10,000 per state), as the decision lease holder last counted.",
    ["state"],
)
# Each state's count stops here: the gauge shows a backlog, it does not weigh it.
ACTIONS_CAP = 10_000


class StoreLatency(monitoring.CommandListener):
    """PyMongo command monitoring: every command of the client, timed by the driver itself,
    so no store call site needs wrapping."""

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        pass

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        STORE_SECONDS.labels(event.command_name).observe(event.duration_micros / 1e6)

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        STORE_SECONDS.labels(event.command_name).observe(event.duration_micros / 1e6)
