"""The exported names are exactly the documented public face."""

import fevex
import fevex.agents
import fevex.events
import fevex.messages
import fevex.models
import fevex.plugins
import fevex.runtime
import fevex.teams
import fevex.testing
import fevex.tools
import fevex.workflows


def test_top_level_exports() -> None:
    assert set(fevex.__all__) == {
        "AgentDefinition",
        "AgentRun",
        "AgentStepResult",
        "ApprovalDecision",
        "Fevex",
        "FevexConfigurationError",
        "FevexError",
        "EventDelivery",
        "FevexRunError",
        "InMemoryRunStore",
        "InputAnswer",
        "Limits",
        "Message",
        "ModelGateway",
        "PendingApproval",
        "PendingInput",
        "RunCancelledError",
        "RunEvent",
        "RunPausedError",
        "RunResult",
        "Schema",
        "Session",
        "TeamDefinition",
        "TeamLimits",
        "TeamMember",
        "TeamRelayedEvent",
        "TeamStep",
        "ToolContext",
        "ToolDefinition",
        "ToolRetry",
        "WorkflowDefinition",
        "WorkflowStep",
        "__version__",
        "create_fevex",
        "define_agent",
        "define_connection",
        "define_team",
        "define_tool",
        "define_workflow",
    }


def test_every_exported_name_exists() -> None:
    for module in (
        fevex,
        fevex.agents,
        fevex.events,
        fevex.messages,
        fevex.models,
        fevex.plugins,
        fevex.runtime,
        fevex.testing,
        fevex.teams,
        fevex.tools,
        fevex.workflows,
    ):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_area_exports() -> None:
    assert set(fevex.workflows.__all__) == {
        "AgentStepResult",
        "EventDelivery",
        "WorkflowDefinition",
        "WorkflowStep",
        "define_workflow",
    }
    assert {"define_agent", "AgentDefinition", "Limits"} <= set(fevex.agents.__all__)
    assert {"define_tool", "ToolContext"} <= set(fevex.tools.__all__)
    assert {
        "ModelGateway",
        "ModelInput",
        "ModelResult",
        "OutputDelta",
        "Completed",
        "ToolSpec",
        "ToolCall",
        "Usage",
    } <= set(fevex.models.__all__)
    assert {"RunStore", "InMemoryRunStore", "AgentRun", "Session", "open_run_store"} <= set(
        fevex.runtime.__all__
    )
    assert {
        "hookimpl",
        "resolve_model",
        "open_run_store",
        "open_trace_exporter",
        "list_plugins",
    } <= set(fevex.plugins.__all__)
    assert {"FakeModel", "check_model_gateway"} <= set(fevex.testing.__all__)
