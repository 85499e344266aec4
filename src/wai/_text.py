"""Text PostgreSQL can store: no NUL character, no lone surrogate."""

from __future__ import annotations

__all__ = ["storable"]


def storable(text: str) -> str:
    """``text`` made storable in a PostgreSQL ``text`` column, unchanged when it already is.

    PostgreSQL refuses the NUL character and text that is not valid UTF-8 (a lone
    surrogate, as ``str(exc)`` of a decoding error may carry). NUL becomes the four
    characters ``\\x00`` and a lone surrogate its backslash escape (``\\udc80``),
    so the message stays readable and recording it can never fail.
    """
    if "\x00" not in text:
        if text.isascii():
            return text
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return text
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
