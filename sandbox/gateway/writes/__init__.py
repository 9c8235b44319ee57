"""Writes you can trust: the task's write ledger (each write sent once per task, its outcome kept),
the write policy (``allow``, ``deny``, ``ask``, a scope guard) and the gateway's gate between them.
See ``docs/writes.md``."""

from sandbox.gateway.writes.gate import RESEND_ARGUMENT, WriteGate, idempotency_parameter, outcome_of_status
from sandbox.gateway.writes.ledger import (
           OUTCOMES,
           Cursor,
           Entry,
           LedgerFile,
           WriteLedger,
           created_ids,
           write_key,
)
from sandbox.gateway.writes.policy import (
           WRITE_MODES,
           Approver,
           Decision,
           Guard,
           WritePolicy,
           WriteRequest,
           Writes,
)

__all__ = ["OUTCOMES", "WRITE_MODES", "RESEND_ARGUMENT", "Approver", "Cursor", "Decision", "Entry", "Guard",
           "LedgerFile", "WriteGate", "WriteLedger", "WritePolicy", "WriteRequest", "Writes", "created_ids",
           "idempotency_parameter", "outcome_of_status", "write_key"]
