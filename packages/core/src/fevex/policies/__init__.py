from fevex.policies.policy import Policy, PolicyRequest, PolicyStage

__all__ = ["Policy", "PolicyRequest", "PolicyStage"]
