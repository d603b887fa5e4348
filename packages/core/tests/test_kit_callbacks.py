"""The kits' shared callback contract: None accepts, raising rejects with the kit's code
(the exception kept as the cause), any other value, plain or awaited, breaks the contract."""

from __future__ import annotations

from typing import Any

import pytest

from fevex.errors import FevexRunError
from fevex.kits.callbacks import call_assertion, check_callable, frozen_json, json_copy

pytestmark = pytest.mark.anyio


async def _accept(*_: Any) -> None:
    return None


def _accept_sync(*_: Any) -> None:
    return None


async def test_none_accepts_sync_and_async() -> None:
    await call_assertion("accept", _accept, 1, rejected="X_REJECTED")
    await call_assertion("accept", _accept_sync, 1, rejected="X_REJECTED")


@pytest.mark.parametrize("returned", [True, False, 0, {"ok": True}, ""])
async def test_any_other_value_breaks_the_contract(returned: Any) -> None:
    def plain(*_: Any) -> Any:
        return returned

    async def awaited(*_: Any) -> Any:
        return returned

    def returns_awaitable(*_: Any) -> Any:
        return awaited()

    for callback in (plain, awaited, returns_awaitable):
        with pytest.raises(FevexRunError) as raised:
            await call_assertion("validate", callback, rejected="X_REJECTED")
        assert raised.value.code == "KIT_CALLBACK_CONTRACT"
        assert raised.value.details["callback"] == "validate"


async def test_raising_rejects_with_the_kits_code_and_keeps_the_cause() -> None:
    class NotAllowed(Exception):
        pass

    def authorize(actor: Any) -> None:
        raise NotAllowed("nobody may")

    with pytest.raises(FevexRunError) as raised:
        await call_assertion("authorize", authorize, {"id": "a"}, rejected="TASK_UNAUTHORIZED")
    assert raised.value.code == "TASK_UNAUTHORIZED"
    assert isinstance(raised.value.__cause__, NotAllowed)
    assert raised.value.details["cause"] == "NotAllowed"


def test_frozen_requests_do_not_follow_the_caller() -> None:
    request = {"items": [1, 2], "nested": {"a": "b"}}
    frozen = frozen_json(request, "state")
    request["items"].append(3)
    request["nested"]["a"] = "changed"
    assert frozen == {"items": [1, 2], "nested": {"a": "b"}}
    given = json_copy(frozen)
    given["items"].clear()
    assert frozen["items"] == [1, 2]
    with pytest.raises(FevexRunError) as raised:
        frozen_json({"when": object()}, "state")
    assert raised.value.code == "KIT_REQUEST_INVALID"
    with pytest.raises(FevexRunError) as raised:
        check_callable("accept", 3)
    assert raised.value.code == "KIT_CALLBACK_CONTRACT"


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception has no text")


class Unrepresentable:
    def __repr__(self) -> str:
        raise RuntimeError("this value has no repr")


async def test_what_cannot_be_shown_as_text_still_gets_the_kits_code() -> None:
    def refuse(*_: Any) -> None:
        raise Unprintable

    def odd(*_: Any) -> Any:
        return Unrepresentable()

    with pytest.raises(FevexRunError) as refused:
        await call_assertion("authorize", refuse, rejected="FAMILY_UNAUTHORIZED")
    assert refused.value.code == "FAMILY_UNAUTHORIZED"
    assert isinstance(refused.value.__cause__, Unprintable)
    assert "Unprintable" in refused.value.message
    with pytest.raises(FevexRunError) as broken:
        await call_assertion("validate", odd, rejected="FAMILY_VERSION_INVALID")
    assert broken.value.code == "KIT_CALLBACK_CONTRACT"
    assert broken.value.details["returned"] == "Unrepresentable"
