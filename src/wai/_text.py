"""Text that wai writes itself, made storable: escaped, never dropped.

Error messages and tracebacks of handler exceptions, follow-up errors and other text
wai produces may hold characters PostgreSQL refuses (see :mod:`wai._storable`): a NUL
byte, or a lone surrogate that is not valid UTF-8. Such text is recorded readably with
those characters written as backslash escapes, so the job's outcome is never lost to them.
"""

from __future__ import annotations

__all__ = ["storable"]


def storable(text: str) -> str:
    """``text`` as PostgreSQL can store it; unchanged when it already can.

    A NUL byte becomes the four characters ``\\x00``; a lone surrogate becomes its
    backslash escape (``"\\ud800"`` → ``\\ud800``).
    """
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if text.isascii():  # O(1) in CPython; ASCII holds no lone surrogate
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
