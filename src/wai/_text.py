"""Text that PostgreSQL can store, made from text that wai produces itself."""

from __future__ import annotations

__all__ = ["storable"]


def storable(text: str) -> str:
    """``text`` with what PostgreSQL refuses escaped: NUL as ``\\x00``, lone surrogates
    as their backslash escapes (``\\ud800``). Text already storable comes back as is.
    """
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
