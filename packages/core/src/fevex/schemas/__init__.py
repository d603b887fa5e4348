from fevex.schemas.schema import Schema

__all__ = ["Schema"]
