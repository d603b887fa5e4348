from fevex.runtime.approval import ApprovalDecision, PendingApproval
from fevex.runtime.context import ExecutionContext
from fevex.runtime.in_memory_run_store import InMemoryRunStore
from fevex.runtime.open_run_store import open_run_store
from fevex.runtime.records import AgentRun, JsonValue, RunStatus, Session
from fevex.runtime.recovery import RecoverySweep, SkippedRun, WakeSweep
from fevex.runtime.run_store import (
    EventOrder,
    ExecutionCommit,
    ExecutionCreate,
    RunLease,
    RunStore,
)

__all__ = [
    "AgentRun",
    "ApprovalDecision",
    "EventOrder",
    "ExecutionContext",
    "ExecutionCommit",
    "ExecutionCreate",
    "InMemoryRunStore",
    "JsonValue",
    "PendingApproval",
    "RecoverySweep",
    "RunLease",
    "RunStatus",
    "RunStore",
    "Session",
    "SkippedRun",
    "WakeSweep",
    "open_run_store",
]
