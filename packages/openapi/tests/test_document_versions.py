"""OpenAPI 3.0 and 3.1, JSON and YAML, references through $id, and one parse per process."""

from __future__ import annotations

import copy
import gc
import json
import sys
import weakref
from typing import Any

import pytest

from fevex import FevexConfigurationError, FevexRunError
from fevex.schemas import compile_json_schema
from fevex.tools import ConnectionContext
from fevex_openapi import (
    ANNOTATION_KEYWORDS,
    CONSTRAINT_KEYWORDS,
    create_openapi_tool_provider,
    document_text,
)
from fevex_openapi.document import load_document
from fevex_openapi.operations import read_operations

pytestmark = pytest.mark.anyio

SERVER = "https://billing.example.com/v1"


def document(version: str, schemas: dict[str, Any], **operation: Any) -> dict[str, Any]:
    """One operation ``putInvoice`` whose body and 200 answer are ``Invoice``."""
    put_invoice: dict[str, Any] = {
        "operationId": "putInvoice",
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Invoice"}}},
        },
        "responses": {
            "200": {
                "description": "The invoice.",
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/Invoice"}}
                },
            }
        },
    }
    put_invoice.update(operation)
    return {
        "openapi": version,
        "info": {"title": "Billing", "version": "1"},
        "servers": [{"url": SERVER}],
        "paths": {"/invoice": {"put": put_invoice}},
        "components": {"schemas": schemas},
    }


def define(doc: Any, allow: tuple[str, ...] = ("putInvoice",), **options: Any) -> Any:
    return create_openapi_tool_provider(document=doc, operations={"allow": list(allow)}, **options)


def refused(doc: Any, allow: tuple[str, ...] = ("putInvoice",), **options: Any) -> Any:
    with pytest.raises(FevexConfigurationError) as caught:
        define(doc, allow, **options)
    return caught.value


async def tools_of(provider: Any) -> list[Any]:
    async def no_credential(name: str) -> str:
        raise AssertionError("discovery needs no credential")

    context = ConnectionContext("billing", "run-1", "session-1", "clerk", no_credential)
    return list(await provider.list_tools(context))


async def body_schema(provider: Any) -> Any:
    """A validator of the tool's ``body``, compiled from the tool schema alone."""
    (tool,) = await tools_of(provider)
    schema = tool.input_schema
    return compile_json_schema(
        {"$defs": schema.get("$defs", {}), **schema["properties"]["body"]}
    ), schema


# The same invoice twice: in OpenAPI 3.0's Schema Object and in JSON Schema 2020-12.
INVOICE_30 = {
    "type": "object",
    "required": ["amount"],
    "properties": {
        "amount": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "example": 12.5},
        "discount": {"type": "number", "maximum": 100, "exclusiveMaximum": False},
        "note": {"type": "string", "nullable": True, "maxLength": 20},
        "status": {"type": "string", "enum": ["open", "paid"], "nullable": True},
        "payer": {
            "nullable": True,
            "description": "Who pays.",
            "oneOf": [{"$ref": "#/components/schemas/Person"}, {"type": "integer"}],
        },
        # A Reference Object's other keywords are ignored in 3.0.
        "owner": {"$ref": "#/components/schemas/Person", "nullable": True, "type": "integer"},
    },
}
INVOICE_31 = {
    "type": "object",
    "required": ["amount"],
    "properties": {
        "amount": {"type": "number", "exclusiveMinimum": 0, "examples": [12.5]},
        "discount": {"type": "number", "maximum": 100},
        "note": {"type": ["string", "null"], "maxLength": 20},
        "status": {"type": ["string", "null"], "enum": ["open", "paid", None]},
        "payer": {
            "description": "Who pays.",
            "anyOf": [
                {"oneOf": [{"$ref": "#/components/schemas/Person"}, {"type": "integer"}]},
                {"type": "null"},
            ],
        },
        "owner": {"$ref": "#/components/schemas/Person"},
    },
}
PERSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

VALUES = [
    ({"amount": 1}, True),
    ({"amount": 0}, False),  # exclusive minimum
    ({"amount": -1}, False),
    ({"amount": 1, "discount": 100}, True),  # exclusiveMaximum: false keeps 100
    ({"amount": 1, "discount": 101}, False),
    ({"amount": 1, "note": None}, True),
    ({"amount": 1, "note": "x" * 21}, False),
    ({"amount": 1, "note": 5}, False),
    ({"amount": 1, "status": None}, True),
    ({"amount": 1, "status": "late"}, False),
    ({"amount": 1, "payer": None}, True),
    ({"amount": 1, "payer": 7}, True),
    ({"amount": 1, "payer": {"name": "Ada"}}, True),
    ({"amount": 1, "payer": "Ada"}, False),
    ({"amount": 1, "owner": {"name": "Ada"}}, True),
    ({"amount": 1, "owner": None}, False),  # the sibling nullable is ignored
    ({"amount": 1, "owner": 3}, False),
]


@pytest.mark.parametrize(
    ("version", "invoice"), [("3.0.3", INVOICE_30), ("3.0.0", INVOICE_30), ("3.1.0", INVOICE_31)]
)
async def test_both_versions_mean_the_same_invoice(version: str, invoice: Any) -> None:
    provider = define(document(version, {"Invoice": invoice, "Person": PERSON}))
    validator, schema = await body_schema(provider)
    assert [not validator.problems(value, "body") for value, _ in VALUES] == [
        accepted for _, accepted in VALUES
    ]
    amount = schema["$defs"]["Invoice"]["properties"]["amount"]
    assert amount["examples"] == [12.5]
    assert "example" not in amount
    assert "nullable" not in json.dumps(schema)


async def test_a_3_0_document_is_translated_to_2020_12() -> None:
    provider = define(document("3.0.3", {"Invoice": INVOICE_30, "Person": PERSON}))
    _, schema = await body_schema(provider)
    properties = schema["$defs"]["Invoice"]["properties"]
    assert properties["amount"] == {"type": "number", "exclusiveMinimum": 0, "examples": [12.5]}
    assert properties["discount"] == {"type": "number", "maximum": 100}
    assert properties["note"] == {"type": ["string", "null"], "maxLength": 20}
    assert properties["status"]["enum"] == ["open", "paid", None]
    assert properties["payer"]["description"] == "Who pays."
    assert properties["payer"]["anyOf"][1] == {"type": "null"}
    assert properties["owner"] == {"$ref": "#/$defs/Person"}


def numbers_document(version: str, values: dict[str, Any], origin: str) -> dict[str, Any]:
    """The billing service's GET /numbers, described in ``version`` with ``values``."""
    answer = {"type": "object", "properties": {"values": values}, "required": ["values"]}
    return {
        "openapi": version,
        "info": {"title": "Numbers", "version": "1"},
        "servers": [{"url": origin}],
        "paths": {
            "/numbers": {
                "get": {
                    "operationId": "getNumbers",
                    "responses": {
                        "200": {
                            "description": "The numbers.",
                            "content": {"application/json": {"schema": answer}},
                        }
                    },
                }
            }
        },
    }


@pytest.mark.parametrize(
    ("version", "values"),
    [
        ("3.0.3", {"type": "array", "items": {"type": "integer"}, "nullable": True}),
        ("3.1.0", {"type": ["array", "null"], "items": {"type": "integer"}}),
    ],
)
async def test_a_null_answer_where_the_document_allows_null_is_returned(
    billing: Any, version: str, values: dict[str, Any]
) -> None:
    provider = define(
        numbers_document(version, values, billing.origin),
        ("getNumbers",),
        allow_hosts=[f"127.0.0.1:{billing.port}"],
    )
    billing.state["values"] = None
    assert await provider.call_tool("getNumbers", {}, None) == {"values": None}
    billing.state["values"] = ["one"]
    with pytest.raises(FevexRunError) as caught:
        await provider.call_tool("getNumbers", {}, None)
    assert caught.value.code == "OPENAPI_RESPONSE_INVALID"


async def test_without_nullable_a_3_0_answer_of_null_breaks_the_schema(billing: Any) -> None:
    values = {"type": "array", "items": {"type": "integer"}}
    provider = define(
        numbers_document("3.0.3", values, billing.origin),
        ("getNumbers",),
        allow_hosts=[f"127.0.0.1:{billing.port}"],
    )
    billing.state["values"] = None
    with pytest.raises(FevexRunError) as caught:
        await provider.call_tool("getNumbers", {}, None)
    assert caught.value.code == "OPENAPI_RESPONSE_INVALID"


@pytest.mark.parametrize(
    ("schema", "code", "words"),
    [
        ({"const": 1}, "OPENAPI_SCHEMA_UNSUPPORTED", "not part of OpenAPI 3.0"),
        ({"examples": [1]}, "OPENAPI_SCHEMA_UNSUPPORTED", "not part of OpenAPI 3.0"),
        ({"type": ["string", "null"]}, "OPENAPI_SCHEMA_INVALID", "use nullable"),
        ({"type": "null"}, "OPENAPI_SCHEMA_INVALID", "use nullable"),
        ({"minimum": 1, "exclusiveMinimum": 1}, "OPENAPI_SCHEMA_INVALID", "boolean"),
        ({"type": "string", "nullable": "yes"}, "OPENAPI_SCHEMA_INVALID", "nullable"),
        ({"patternProperties": {}}, "OPENAPI_SCHEMA_UNSUPPORTED", "patternProperties"),
        ({"$anchor": "amount"}, "OPENAPI_SCHEMA_UNSUPPORTED", "not part of OpenAPI 3.0"),
        (
            {"$schema": "https://spec.openapis.org/oas/3.1/dialect/base"},
            "OPENAPI_SCHEMA_UNSUPPORTED",
            "not part of OpenAPI 3.0",
        ),
    ],
)
def test_what_3_0_does_not_have_is_refused_in_a_3_0_document(
    schema: dict[str, Any], code: str, words: str
) -> None:
    invoice = {"type": "object", "properties": {"amount": schema}}
    error = refused(document("3.0.3", {"Invoice": invoice}))
    assert error.code == code
    assert words in error.message
    assert "#/components/schemas/Invoice/properties/amount" in error.message


def test_3_0_keywords_are_refused_in_a_3_1_document() -> None:
    invoice = {"type": "object", "properties": {"amount": {"type": "number", "nullable": True}}}
    error = refused(document("3.1.0", {"Invoice": invoice}))
    assert error.code == "OPENAPI_SCHEMA_UNSUPPORTED"
    assert error.details["keyword"] == "nullable"


async def test_keywords_no_vocabulary_defines_are_ignored_as_annotations() -> None:
    invoice = copy.deepcopy(INVOICE_31)
    amount = invoice["properties"]["amount"]
    # None of these is a JSON Schema keyword: each is an annotation, holding no schema.
    amount["swagger-extension"] = True
    amount["maximumAmount"] = 10
    amount["vendor"] = {"$ref": "https://elsewhere.example/x.json", "nullable": True}
    doc = document("3.1.0", {"Invoice": invoice, "Person": PERSON})
    validator, schema = await body_schema(define(doc))
    assert schema["$defs"]["Invoice"]["properties"]["amount"] == INVOICE_31["properties"]["amount"]
    assert not validator.problems({"amount": 12}, "body")
    assert validator.problems({"amount": 0}, "body")


@pytest.mark.parametrize(
    "dialect",
    [
        "https://spec.openapis.org/oas/3.1/dialect/base",
        "https://spec.openapis.org/oas/3.1/dialect/2024-10-25",
        "https://json-schema.org/draft/2020-12/schema",
    ],
)
async def test_a_schema_may_name_the_default_dialect(dialect: str) -> None:
    invoice = {"$schema": dialect, "$vocabulary": {dialect: True}, **INVOICE_31}
    doc = document("3.1.0", {"Invoice": invoice, "Person": PERSON})
    validator, schema = await body_schema(define(doc))
    assert "$schema" not in schema["$defs"]["Invoice"]
    assert "$vocabulary" not in schema["$defs"]["Invoice"]
    assert validator.problems({"amount": 0}, "body")


@pytest.mark.parametrize(
    "dialect", ["http://json-schema.org/draft-07/schema#", "https://example.com/my-dialect", 7]
)
def test_a_schema_in_another_dialect_is_refused(dialect: Any) -> None:
    invoice = {"$schema": dialect, **INVOICE_31}
    error = refused(document("3.1.0", {"Invoice": invoice, "Person": PERSON}))
    assert error.code == "OPENAPI_SCHEMA_UNSUPPORTED"
    assert error.details == {"keyword": "$schema", "location": "#/components/schemas/Invoice"}
    assert "may mean something else" in error.message


def test_every_json_schema_keyword_is_enforced_annotated_left_out_or_refused() -> None:
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]

    from fevex_openapi.schema_subset import LEFT_OUT_KEYWORDS, REFUSED_KEYWORDS

    keywords: set[str] = set()
    for uri in REGISTRY:
        if uri.startswith("https://json-schema.org/draft/2020-12/"):
            keywords.update(REGISTRY.contents(uri).get("properties", {}))
    kinds = [CONSTRAINT_KEYWORDS, ANNOTATION_KEYWORDS, LEFT_OUT_KEYWORDS, set(REFUSED_KEYWORDS)]
    assert keywords <= set().union(*kinds)
    for index, kind in enumerate(kinds):
        for other in kinds[index + 1 :]:
            assert not kind & other


def test_swagger_2_stays_refused() -> None:
    doc = document("3.0.3", {"Invoice": PERSON})
    del doc["openapi"]
    doc["swagger"] = "2.0"
    error = refused(doc)
    assert error.code == "OPENAPI_VERSION_UNSUPPORTED"
    assert "3.0.x and 3.1.x" in error.message


# --- YAML -----------------------------------------------------------------------------

PETSTORE_YAML = """\
openapi: 3.1.0
info:
  title: Swagger Petstore
  version: 1.0.0
  x-released: 2024-05-01
servers:
  - url: https://petstore.example.com/v1
paths:
  /pets/{petId}:
    get:
      operationId: showPetById
      parameters:
        - name: petId
          in: path
          required: true
          schema: {type: string}
      responses:
        200:
          description: Expected response to a valid request
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Pet'
        default:
          description: unexpected error
components:
  schemas:
    Pet:
      type: object
      required: [id, name]
      properties:
        id: {type: integer, format: int64}
        name: {type: string}
        tag: {type: string}
"""


async def test_a_yaml_document_loads_like_its_json() -> None:
    import yaml

    from_yaml = await tools_of(define(PETSTORE_YAML, ("showPetById",)))
    as_json = json.dumps(yaml.safe_load(PETSTORE_YAML), default=str)
    from_json = await tools_of(define(as_json, ("showPetById",)))
    assert from_yaml == from_json
    assert await tools_of(define(PETSTORE_YAML.encode(), ("showPetById",))) == from_yaml
    assert [tool.name for tool in from_yaml] == ["showPetById"]


async def test_an_unquoted_yaml_status_code_is_the_response_for_that_status(billing: Any) -> None:
    text = f"""\
openapi: 3.0.3
info: {{title: Numbers, version: '1'}}
servers: [{{url: '{billing.origin}'}}]
paths:
  /numbers:
    get:
      operationId: getNumbers
      responses:
        200:
          description: The numbers.
          content:
            application/json:
              schema:
                type: object
                properties:
                  values: {{type: array, items: {{type: integer}}}}
"""
    provider = define(text, ("getNumbers",), allow_hosts=[f"127.0.0.1:{billing.port}"])
    billing.state["values"] = [1, 2]
    assert await provider.call_tool("getNumbers", {}, None) == {"values": [1, 2]}
    billing.state["values"] = ["one"]
    with pytest.raises(FevexRunError) as caught:
        await provider.call_tool("getNumbers", {}, None)
    assert caught.value.code == "OPENAPI_RESPONSE_INVALID"


def test_an_unquoted_yaml_reference_is_explained() -> None:
    quoted = "$ref: '#/components/schemas/Pet'"
    text = PETSTORE_YAML.replace(quoted, "$ref: #/components/schemas/Pet")
    error = refused(text, ("showPetById",))
    assert error.code == "OPENAPI_REF_INVALID"
    assert "is null" in error.message
    assert "comment" in error.message
    assert "NoneType" not in error.message


def test_yaml_without_pyyaml_is_refused_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # what an environment without PyYAML gives
    error = refused(PETSTORE_YAML + "\n# not cached yet\n", ("showPetById",))
    assert error.code == "OPENAPI_YAML_UNAVAILABLE"
    assert 'pip install "pyyaml>=6.0"' in error.message  # whatever installed fevex-openapi
    # JSON needs no YAML library.
    define(json.dumps(document("3.1.0", {"Invoice": PERSON})))


async def test_yaml_over_the_size_bound_is_refused_before_it_is_read() -> None:
    from fevex_openapi.document_text import YAML_MAX_CHARACTERS

    text = f"{PETSTORE_YAML}# {'x' * YAML_MAX_CHARACTERS}\n"
    error = refused(text, ("showPetById",))
    assert error.code == "OPENAPI_DOCUMENT_TOO_LARGE"
    assert error.details == {"characters": len(text), "limit": YAML_MAX_CHARACTERS}
    assert "Convert it to JSON" in error.message
    # JSON has no such bound.
    padded = {**document("3.1.0", {"Invoice": PERSON}), "x-padding": "x" * YAML_MAX_CHARACTERS}
    assert [tool.name for tool in await tools_of(define(json.dumps(padded)))] == ["putInvoice"]


@pytest.mark.parametrize("loader", ["CSafeLoader", "SafeLoader"])
def test_reading_yaml_stops_at_the_time_bound(monkeypatch: pytest.MonkeyPatch, loader: str) -> None:
    import yaml

    if loader == "SafeLoader":
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    monkeypatch.setattr(document_text, "YAML_MAX_SECONDS", 0.0)
    error = refused(f"{PETSTORE_YAML}# read with {loader}\n", ("showPetById",))
    assert error.code == "OPENAPI_DOCUMENT_TOO_LARGE"
    assert error.details == {"seconds": 0.0}
    assert "took more than 0 s" in error.message


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("openapi: 3.1.0\npaths: !!python/object/apply:os.system ['true']\n", "UNREADABLE"),
        ("a: &a [x, x, x, x, x, x, x, x]\n"
         + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                   for p, c in zip("abcdefgh", "bcdefghi", strict=True)), "INVALID"),
        ("openapi: 3.1.0\npaths: {}\nx: &loop [*loop]\n", "INVALID"),
        ("openapi: 3.1.0\npaths: {}\nx: .nan\n", "INVALID"),
        ("openapi: 3.1.0\npaths: {}\n? [1, 2]\n: list key\n", "UNREADABLE"),
        ("openapi: 3.1.0\npaths: {}\n? !!set {a}\n: set key\n", "UNREADABLE"),
        ("openapi: 3.1.0\npaths: {}\nx: !!binary aGk=\n", "INVALID"),
        ("- just\n- a list\n", "INVALID"),
    ],
)  # fmt: skip
def test_yaml_that_is_not_plain_json_data_is_refused(text: str, code: str) -> None:
    assert refused(text).code == f"OPENAPI_DOCUMENT_{code}"


# --- references -----------------------------------------------------------------------


async def test_references_resolve_through_a_schemas_id() -> None:
    schemas = {
        "Invoice": {
            "$id": "https://billing.example.com/schemas/invoice",
            "type": "object",
            "properties": {
                # Relative to the Invoice resource's own $id.
                "customer": {"$ref": "customer"},
                "payer": {"$ref": "https://billing.example.com/schemas/customer#/properties/name"},
            },
        },
        "Customer": {
            "$id": "https://billing.example.com/schemas/customer",
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1}},
            "required": ["name"],
        },
    }
    validator, schema = await body_schema(define(document("3.1.0", schemas)))
    properties = schema["$defs"]["Invoice"]["properties"]
    assert properties["customer"] == {"$ref": "#/$defs/Customer"}
    assert properties["payer"] == {"$ref": "#/$defs/Customer~1properties~1name"}
    assert "$id" not in json.dumps(schema)
    assert not validator.problems({"customer": {"name": "Ada"}, "payer": "Ada"}, "body")
    assert validator.problems({"customer": {}}, "body")
    assert validator.problems({"payer": ""}, "body")


async def test_references_resolve_to_an_anchor_in_the_resource_they_name() -> None:
    schemas = {
        "Invoice": {
            "type": "object",
            "properties": {
                # A plain name in the document's own resource (no $id around it).
                "payer": {"$ref": "#payer"},
                # A plain name in the resource of an $id.
                "total": {"$ref": "https://billing.example.com/schemas/money#amount"},
                "money": {"$ref": "https://billing.example.com/schemas/money"},
            },
        },
        "Person": {"$anchor": "payer", **PERSON},
        "Money": {
            "$id": "https://billing.example.com/schemas/money",
            "type": "object",
            "properties": {
                "amount": {"$anchor": "amount", "type": "number", "minimum": 0},
                # Inside the Money resource, "#amount" is Money's own anchor.
                "rounded": {"$ref": "#amount", "multipleOf": 1},
            },
        },
    }
    validator, schema = await body_schema(define(document("3.1.0", schemas)))
    properties = schema["$defs"]["Invoice"]["properties"]
    assert properties["payer"] == {"$ref": "#/$defs/Person"}
    assert properties["total"] == {"$ref": "#/$defs/Money~1properties~1amount"}
    assert schema["$defs"]["Money/properties/amount"] == {"type": "number", "minimum": 0}
    assert "$anchor" not in json.dumps(schema)
    assert not validator.problems({"payer": {"name": "Ada"}, "total": 1.5}, "body")
    assert validator.problems({"payer": {}}, "body")
    assert validator.problems({"total": -1}, "body")
    assert not validator.problems({"money": {"amount": 0.5, "rounded": 2}}, "body")
    assert validator.problems({"money": {"rounded": -2}}, "body")
    assert validator.problems({"money": {"rounded": 0.5}}, "body")


def test_an_anchor_must_be_a_plain_name() -> None:
    invoice = {"type": "object", "properties": {"payer": {"$anchor": "1st payer"}}}
    error = refused(document("3.1.0", {"Invoice": invoice}))
    assert error.code == "OPENAPI_SCHEMA_INVALID"
    assert "$anchor" in error.message


async def test_a_reference_into_a_component_is_its_own_definition() -> None:
    invoice = copy.deepcopy(INVOICE_30)
    invoice["properties"]["copy"] = {"$ref": "#/components/schemas/Invoice/properties/note"}
    validator, schema = await body_schema(
        define(document("3.0.3", {"Invoice": invoice, "Person": PERSON}))
    )
    note = schema["$defs"]["Invoice/properties/note"]
    assert note == {"type": ["string", "null"], "maxLength": 20}
    assert validator.problems({"amount": 1, "copy": "x" * 21}, "body")


@pytest.mark.parametrize(
    ("ref", "code", "words"),
    [
        (None, "OPENAPI_REF_INVALID", "is null"),
        (5, "OPENAPI_REF_INVALID", "is a int"),
        ("", "OPENAPI_REF_INVALID", "empty string"),
        (["#/components/schemas/Person"], "OPENAPI_REF_INVALID", "is a list"),
        ("#/components/schemas/~2Person", "OPENAPI_REF_INVALID", "JSON Pointer"),
        ("#/components/schemas/Nobody", "OPENAPI_REF_INVALID", "points at nothing"),
        ("#person", "OPENAPI_REF_INVALID", "anchor 'person', which no schema"),
        ("https://billing.example.com/schemas/invoice#nobody", "OPENAPI_REF_INVALID", "anchor"),
        ("https://elsewhere.example/person", "OPENAPI_REF_UNSUPPORTED", "leaves the document"),
        ("#/paths", "OPENAPI_REF_UNSUPPORTED", "#/components/schemas/"),
    ],
)
def test_null_and_malformed_references_are_refused_with_a_clear_message(
    ref: Any, code: str, words: str
) -> None:
    invoice = {
        "$id": "https://billing.example.com/schemas/invoice",
        "type": "object",
        "properties": {"payer": {"$ref": ref}},
    }
    error = refused(document("3.1.0", {"Invoice": invoice, "Person": PERSON}))
    assert error.code == code
    assert words in error.message
    assert "#/components/schemas/Invoice/properties/payer" in error.message


def test_a_null_reference_object_outside_schemas_is_explained() -> None:
    doc = document("3.0.3", {"Invoice": PERSON}, parameters=[{"$ref": None}])
    error = refused(doc)
    assert error.code == "OPENAPI_REF_INVALID"
    assert "#/paths/~1invoice/put/parameters/0" in error.message
    assert "quote the reference" in error.message


# --- one parse per process --------------------------------------------------------------


def test_a_document_is_parsed_once_per_process_by_its_content() -> None:
    doc = document("3.1.0", {"Invoice": PERSON})
    text = json.dumps(doc)
    first = load_document(text)
    assert load_document(text) is first
    assert load_document(text.encode()) is first  # the same bytes
    assert load_document(copy.deepcopy(doc)) is load_document(doc)
    changed = copy.deepcopy(doc)
    changed["info"]["title"] = "Other"
    assert load_document(changed) is not load_document(doc)
    # The cached copy is private: changing the caller's dict afterwards reaches nothing.
    doc["paths"].clear()
    assert first.operations.keys() == {"putInvoice"}


async def test_providers_of_one_document_share_what_they_read() -> None:
    doc = json.dumps(document("3.1.0", {"Invoice": INVOICE_31, "Person": PERSON}))
    first, second = define(doc), define(doc, operation_names={"putInvoice": "put_invoice"})
    assert [tool.name for tool in await tools_of(second)] == ["put_invoice"]
    assert (await tools_of(first))[0].input_schema == (await tools_of(second))[0].input_schema
    loaded = load_document(doc)
    once = read_operations(loaded, ["putInvoice"], None)["putInvoice"]
    assert read_operations(loaded, ["putInvoice"], None)["putInvoice"] is once


async def test_a_call_names_the_renamed_tool() -> None:
    provider = define(
        json.dumps(document("3.1.0", {"Invoice": INVOICE_31, "Person": PERSON})),
        operation_names=lambda operation_id: "invoices_put",
    )
    assert provider.tool_names == {"putInvoice": "invoices_put"}
    with pytest.raises(FevexRunError) as caught:
        await provider.call_tool("putInvoice", {"body": {"amount": 1}}, None)
    assert caught.value.code == "OPENAPI_OPERATION_UNKNOWN"
    with pytest.raises(FevexRunError) as caught:
        await provider.call_tool("invoices_put", {"body": {"amount": 0}}, None)
    assert caught.value.code == "OPENAPI_INPUT_INVALID"


def test_the_process_keeps_a_bounded_number_of_documents() -> None:
    def text(index: int) -> str:
        return json.dumps(document("3.1.0", {"Invoice": PERSON}, summary=f"Version {index}."))

    provider = define(text(0))  # the document, its schemas and its operation read
    kept = weakref.ref(load_document(text(0)))
    for index in range(1, 12):
        define(text(index))
    gc.collect()
    # Evicted with everything read from it; the provider keeps only its operation.
    assert kept() is None
    assert provider.tool_names == {"putInvoice": "putInvoice"}


async def test_a_broken_path_item_reference_fails_only_a_provider_that_needs_it() -> None:
    doc = document("3.0.3", {"Invoice": PERSON})
    doc["paths"]["/elsewhere"] = {"$ref": None}
    (tool,) = await tools_of(define(doc))
    assert tool.name == "putInvoice"
    error = refused(doc, ("getElsewhere",))
    assert error.code == "OPENAPI_REF_INVALID"
    assert "#/paths/~1elsewhere" in error.message
