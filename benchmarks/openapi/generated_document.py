"""A synthetic OpenAPI 3.0.3 document shaped like GitHub's REST description.

For machines without npm, and for the benchmark's smoke mode. Operations have GitHub's
style of operationId (``repos-12/get``), path and query parameters by reference,
``nullable`` and ``example`` in their schemas, and 2xx responses whose schemas reach a
chain of components; at the default size the JSON text is about as big as GitHub's
(12.4 MiB, 1,223 operations).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["generated_document"]


def generated_document(operations: int = 1223, components: int = 2170) -> bytes:
    """The document's JSON text: ``operations`` operations over ``components`` schemas."""
    schemas: dict[str, Any] = {}
    for index in range(components):
        properties: dict[str, Any] = {
            f"field_{k}": {
                "type": "string",
                "nullable": k % 3 == 0,
                "example": f"value {k}",
                "description": f"Field {k} of component {index}. " * 3,
            }
            for k in range(24)
        }
        properties["count"] = {"type": "integer", "minimum": 0, "exclusiveMinimum": True}
        if index:
            properties["parent"] = {
                "nullable": True,
                "allOf": [{"$ref": f"#/components/schemas/component-{index // 2}"}],
            }
        schemas[f"component-{index}"] = {
            "type": "object",
            "description": f"Component {index}.",
            "properties": properties,
            "required": ["field_1", "count"],
        }
    parameters = {
        "owner": {"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}},
        "per-page": {
            "name": "per_page",
            "in": "query",
            "schema": {"type": "integer", "default": 30, "maximum": 100},
        },
    }
    paths: dict[str, Any] = {}
    for index in range(operations):
        group = f"area-{index % 40}"
        component = f"component-{(index * 7) % components}"
        paths[f"/{group}/{{owner}}/items-{index}"] = {
            "get": {
                "operationId": f"{group}/get-item-{index}",
                "summary": f"Get item {index}.",
                "description": f"Returns item {index} of {group}. " * 8,
                "parameters": [
                    {"$ref": "#/components/parameters/owner"},
                    {"$ref": "#/components/parameters/per-page"},
                ],
                "responses": {
                    "200": {
                        "description": "The item.",
                        "content": {
                            "application/json": {
                                "schema": {"$ref": f"#/components/schemas/{component}"},
                                "example": {"field_1": "x", "count": 1},
                            }
                        },
                    },
                    "404": {"description": "Not found."},
                },
            }
        }
    document = {
        "openapi": "3.0.3",
        "info": {"title": "Generated", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": paths,
        "components": {"schemas": schemas, "parameters": parameters},
    }
    return json.dumps(document, indent=1).encode()
