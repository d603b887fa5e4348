from fevex.events.run_event import EVENT_TYPES, RunEvent, RunEventType

__all__ = ["EVENT_TYPES", "RunEvent", "RunEventType"]
