"""Conversions both APIs share: media as URLs, tool results as text."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from fevex.messages import FilePart, ImagePart, ToolResultPart
from fevex_openai.error_mapping import invalid_request

if TYPE_CHECKING:
    from fevex_openai.profile import ProviderProfile

__all__ = ["data_url", "media_url", "tool_result_text", "unsupported_part"]


def data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def media_url(part: ImagePart | FilePart, profile: ProviderProfile) -> str:
    """The part's URL, or its base64 data as a data URL."""
    if part.url:
        return part.url
    if part.data is not None:
        return data_url(part.media_type, part.data)
    raise invalid_request(
        profile.name,
        "PROVIDER_INPUT_UNSUPPORTED",
        f"A {part.type} part has neither data nor a url, so there is nothing to send.",
        part=part.type,
    )


def tool_result_text(part: ToolResultPart) -> str:
    """The tool output as the model reads it: text as is, other values as JSON.

    A failed call reads ``{"error": ...}`` with the error as the run recorded it, for
    every provider: a JSON object the model cannot mistake for a successful output.
    """
    if part.is_error:
        return json.dumps({"error": part.output}, ensure_ascii=False)
    if isinstance(part.output, str):
        return part.output
    return json.dumps(part.output, ensure_ascii=False)


def unsupported_part(profile: ProviderProfile, role: str, kind: str, api: str) -> Exception:
    return invalid_request(
        profile.name,
        "PROVIDER_INPUT_UNSUPPORTED",
        f"{profile.label}'s {api} API does not take {kind} parts in {role} messages.",
        role=role,
        part=kind,
        api=api,
    )
