"""The one bound on a tool's description, which the model reads at every step."""

MAX_DESCRIPTION = 1024


def bounded_description(text: str) -> str:
    """``text`` cut to ``MAX_DESCRIPTION`` characters, the last one an ellipsis when cut."""
    if len(text) <= MAX_DESCRIPTION:
        return text
    return text[: MAX_DESCRIPTION - 1] + "…"
