"""fevex-openapi: allowlisted operations of an OpenAPI 3.0 or 3.1 service as fevex tools.

Importing this package imports no HTTP client; httpx2 loads on the first operation call.
"""

from fevex_openapi.__about__ import __version__
from fevex_openapi.operation_names import default_tool_name
from fevex_openapi.provider import (
    HeaderSource,
    OpenApiToolProvider,
    OperationNames,
    create_openapi_tool_provider,
)
from fevex_openapi.schema_subset import ANNOTATION_KEYWORDS, CONSTRAINT_KEYWORDS

__all__ = [
    "ANNOTATION_KEYWORDS",
    "CONSTRAINT_KEYWORDS",
    "HeaderSource",
    "OpenApiToolProvider",
    "OperationNames",
    "__version__",
    "create_openapi_tool_provider",
    "default_tool_name",
]
