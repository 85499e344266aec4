"""The version of wai, in one place (re-exported as ``wai.__version__``)."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
