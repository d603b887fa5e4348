"""Tool names for operations: the default rule, operation_names=, collisions, long names."""

from __future__ import annotations

import re
from typing import Any

import pytest

from fevex import FevexConfigurationError
from fevex.tools import ConnectionContext
from fevex_openapi import create_openapi_tool_provider, default_tool_name

pytestmark = pytest.mark.anyio

PREFIX = "enterprise-admin_list-self-hosted-runner-groups-for-ent"
LONG = "enterprise-admin/list-self-hosted-runner-groups-for-enterprise-with-a-long-tail"


def document(*operation_ids: str) -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "Many", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": {
            f"/op/{index}": {"get": {"operationId": operation_id, "responses": {"204": {}}}}
            for index, operation_id in enumerate(operation_ids)
        },
    }


def define(ids: tuple[str, ...], **options: Any) -> Any:
    return create_openapi_tool_provider(
        document=document(*ids), operations={"allow": list(ids)}, **options
    )


async def names_of(provider: Any) -> list[str]:
    async def no_credential(name: str) -> str:
        raise AssertionError("discovery needs no credential")

    context = ConnectionContext("api", "run-1", "session-1", "clerk", no_credential)
    return [tool.name for tool in await provider.list_tools(context)]


@pytest.mark.parametrize(
    ("operation_id", "name"),
    [
        ("getInvoice", "getInvoice"),
        ("repos/get", "repos_get"),
        ("repos/get-content", "repos_get-content"),
        ("pets.list", "pets_list"),
        ("/users/{id}:", "users_id"),
        ("café/crème", "caf_cr_me"),
        ("///", "operation"),
    ],
)
def test_the_default_name(operation_id: str, name: str) -> None:
    assert default_tool_name(operation_id) == name


def test_a_long_operation_id_is_shortened_with_a_stable_hash_suffix() -> None:
    name = default_tool_name(LONG)
    assert len(name) == 64
    assert re.fullmatch(PREFIX + r"_[0-9a-f]{8}", name)
    assert default_tool_name(LONG) == name  # the same on every run and machine
    assert name.endswith("_04ae6a12")
    # Two that share their first 55 characters are still two tools.
    other = default_tool_name(LONG + "-and-more")
    assert other[:55] == name[:55]
    assert other != name


async def test_github_style_ids_become_tools_by_default() -> None:
    provider = define(("repos/get", "issues/list-for-repo", LONG))
    names = ["repos_get", "issues_list-for-repo", default_tool_name(LONG)]
    assert await names_of(provider) == names
    assert provider.tool_names == {
        "repos/get": "repos_get",
        "issues/list-for-repo": "issues_list-for-repo",
        LONG: default_tool_name(LONG),
    }


async def test_operation_names_as_a_mapping_names_some_and_the_rule_the_rest() -> None:
    provider = define(("repos/get", "repos/list"), operation_names={"repos/get": "get_repo"})
    assert await names_of(provider) == ["get_repo", "repos_list"]


async def test_operation_names_as_a_function() -> None:
    provider = define(("repos/get", "repos/list"), operation_names=lambda o: o.split("/")[1])
    assert await names_of(provider) == ["get", "list"]


@pytest.mark.parametrize(
    ("ids", "options", "pair"),
    [
        (("repos/get", "repos_get"), {}, ["repos/get", "repos_get"]),
        (("a/b", "a.b"), {}, ["a/b", "a.b"]),
        (("repos/get", "repos/list"), {"operation_names": lambda o: "same"}, None),
        (("x", "y"), {"operation_names": {"y": "x"}}, ["x", "y"]),
    ],
)
def test_two_operations_with_one_tool_name_are_refused_naming_both(
    ids: tuple[str, ...], options: dict[str, Any], pair: list[str] | None
) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        define(ids, **options)
    error = caught.value
    assert error.code == "OPENAPI_OPERATION_NAME_CONFLICT"
    assert sorted(error.details["operations"]) == sorted(pair or list(ids))
    for operation_id in pair or ids:
        assert repr(operation_id) in error.message


@pytest.mark.parametrize(
    "operation_names",
    [
        {"repos/get": "repos/get"},
        {"repos/get": "x" * 65},
        {"repos/get": ""},
        {"repos/get": 3},
        {"repos/delete": "delete"},  # not an allowed operation
        lambda operation_id: None,
        ["repos_get"],
    ],
)
def test_names_the_application_gives_must_be_tool_names(operation_names: Any) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        define(("repos/get",), operation_names=operation_names)
    assert caught.value.code == "OPENAPI_OPERATION_NAMES_INVALID"
