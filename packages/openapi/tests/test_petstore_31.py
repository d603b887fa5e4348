"""The Petstore of OpenAPI 3.1 loads whole, and each JSON Schema 2020-12 feature it shows
means what 2020-12 says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fevex.schemas import compile_json_schema
from fevex.tools import ConnectionContext
from fevex_openapi import create_openapi_tool_provider

pytestmark = pytest.mark.anyio

PETSTORE = (Path(__file__).parent / "fixtures" / "petstore-3.1.yaml").read_text()
OPERATIONS = [
    "updatePet",
    "addPet",
    "findPetsByStatus",
    "findPetsByTags",
    "getPetById",
    "deletePet",
]
# Its server is relative (/api/v31), so base_url names the service.
BASE_URL = "https://petstore.example.com/api/v31"


async def tools(*operations: str) -> list[Any]:
    async def no_credential(name: str) -> str:
        raise AssertionError("discovery needs no credential")

    provider = create_openapi_tool_provider(
        document=PETSTORE, operations={"allow": list(operations)}, base_url=BASE_URL
    )
    context = ConnectionContext("petstore", "run-1", "session-1", "clerk", no_credential)
    return list(await provider.list_tools(context))


async def test_every_operation_of_the_petstore_loads() -> None:
    assert [tool.name for tool in await tools(*OPERATIONS)] == OPERATIONS


async def test_the_pet_schema_means_what_json_schema_2020_12_says() -> None:
    (tool,) = await tools("addPet")
    schema = tool.input_schema
    body = compile_json_schema({"$defs": schema["$defs"], **schema["properties"]["body"]})
    pet = {"id": 1, "name": "Rex", "photoUrls": []}
    assert body.problems(pet) == []
    assert body.problems({"name": "Rex", "photoUrls": []})  # the body requires an id too
    # petDetailsId refers to the $anchor pet_details_id inside PetDetails (an integer).
    assert body.problems({**pet, "petDetailsId": 3}) == []
    assert body.problems({**pet, "petDetailsId": "3"})
    assert body.problems({**pet, "petDetails": {"id": 2, "tag": {"name": "good"}}}) == []
    assert body.problems({**pet, "petDetails": {"tag": {"id": "x"}}})
    # swagger-extension is an annotation; the constraints beside it still hold.
    assert body.problems({**pet, "availableInstances": 5}) == []
    assert body.problems({**pet, "availableInstances": 10})
    text = json.dumps(schema)
    for left_out in ("$schema", "$vocabulary", "$anchor", "$id", "swagger-extension"):
        assert left_out not in text
