"""The images and files of a tool result (``ToolResultPart.content``), as each API takes
them.

- Responses: the ``function_call_output`` carries a list: the result's text as
  ``input_text``, then each image as ``input_image`` and each PDF as ``input_file``.
- Chat Completions: a ``tool`` message carries text only, so the result's text goes there
  and its media follow the step's tool messages in one ``user`` message, headed by a text
  naming the call they came from: images as ``image_url``, WAV and MP3 audio as
  ``input_audio``, PDFs as ``file``.
- A profile without media parts (DeepSeek and most OpenAI-compatible servers) takes none:
  the tool message's text ends with a note per part saying what was not sent.

Whatever an API cannot take (audio in Responses, other file types, a file given as a URL
where only data goes) becomes such a note in the text too, so the model knows the tool
returned it, and the run goes on.
"""

from __future__ import annotations

from typing import Any

from fevex.messages import FilePart, ImagePart, ToolResultPart
from fevex_openai.message_parts import media_url, tool_result_text
from fevex_openai.profile import ProviderProfile

__all__ = ["chat_media_message", "chat_tool_text", "responses_tool_output"]

Media = ImagePart | FilePart
# The audio formats Chat Completions' input_audio takes, by media type.
_CHAT_AUDIO = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav"}
_CHAT_AUDIO |= {"audio/mpeg": "mp3", "audio/mp3": "mp3"}
_DOCUMENTS = frozenset({"application/pdf"})


def not_sent(part: Media, where: str) -> str:
    """The note that stands for a part an API does not take."""
    kind = "image" if isinstance(part, ImagePart) else "file"
    if part.media_type.startswith("audio/"):
        kind = "audio"
    return f"[the tool also returned {kind} ({part.media_type}), not sent: {where}]"


def responses_tool_output(
    part: ToolResultPart, profile: ProviderProfile
) -> str | list[dict[str, Any]]:
    """A ``function_call_output``'s ``output``: text alone, or a list with the media."""
    text = tool_result_text(part)
    if not part.content:
        return text
    notes: list[str] = []
    items: list[dict[str, Any]] = []
    for media in part.content:
        if isinstance(media, ImagePart):
            url = media_url(media, profile)
            items.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif media.media_type in _DOCUMENTS:
            items.append(_responses_file(media, profile))
        else:
            notes.append(not_sent(media, "the Responses API takes no such input"))
    text = "\n".join([text, *notes]) if text else "\n".join(notes)
    return ([{"type": "input_text", "text": text}] if text else []) + items


def _responses_file(part: FilePart, profile: ProviderProfile) -> dict[str, Any]:
    if part.url and part.data is None:
        return {"type": "input_file", "file_url": part.url}
    return {
        "type": "input_file",
        "file_data": media_url(part, profile),
        "filename": part.name or "file",
    }


def chat_tool_text(part: ToolResultPart, profile: ProviderProfile) -> str:
    """A ``tool`` message's content: the result's text, with a note for each part that
    will not follow in a user message."""
    text = tool_result_text(part)
    notes = [
        not_sent(media, _chat_refusal(media, profile))
        for media in part.content
        if _chat_refusal(media, profile)
    ]
    return "\n".join([text, *notes]) if notes else text


def chat_media_message(
    results: list[ToolResultPart], profile: ProviderProfile
) -> dict[str, Any] | None:
    """The ``user`` message that carries the media of a step's tool results, or ``None``
    when there is none to send."""
    content: list[dict[str, Any]] = []
    for result in results:
        sent = [media for media in result.content if not _chat_refusal(media, profile)]
        if not sent:
            continue
        heading = f"The images and files that tool call {result.id} ({result.name}) returned:"
        content.append({"type": "text", "text": heading})
        content.extend(_chat_item(media, profile) for media in sent)
    return {"role": "user", "content": content} if content else None


def _chat_refusal(part: Media, profile: ProviderProfile) -> str:
    """Why Chat Completions does not take ``part`` from a tool, or ``""`` when it does."""
    if not profile.media_parts:
        return f"{profile.label}'s Chat Completions API takes text only"
    if isinstance(part, ImagePart):
        return ""
    if part.data is None:
        return "Chat Completions takes files as data, not as URLs"
    if part.media_type in _CHAT_AUDIO or part.media_type in _DOCUMENTS:
        return ""
    return "Chat Completions takes no such input"


def _chat_item(part: Media, profile: ProviderProfile) -> dict[str, Any]:
    if isinstance(part, ImagePart):
        return {"type": "image_url", "image_url": {"url": media_url(part, profile)}}
    audio = _CHAT_AUDIO.get(part.media_type)
    if audio is not None:
        return {"type": "input_audio", "input_audio": {"data": part.data, "format": audio}}
    return {
        "type": "file",
        "file": {"file_data": media_url(part, profile), "filename": part.name or "file"},
    }
