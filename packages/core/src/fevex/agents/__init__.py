from fevex.agents.definition import AgentDefinition, Limits, define_agent

__all__ = ["AgentDefinition", "Limits", "define_agent"]
