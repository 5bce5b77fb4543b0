"""Webhooks (docs/webhooks.md): a workflow's end told to URLs the installation
(``PINGO_WEBHOOKS``) or the workflow (``"webhooks"``) names, with the bus's
``workflow.finished`` event as the body, signed (``signing``), from an outbox in the store
that survives restarts and outages of the broker (``delivery``, ``shared/store/webhooks.py``).
Which URLs a workflow may name: ``urls``."""
