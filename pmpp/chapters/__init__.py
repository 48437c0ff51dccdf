"""The workbook's chapters, by name."""
from __future__ import annotations

import importlib

from .base import Chapter, CheckResult, Library, Model, Variant

# name -> module under pmpp.chapters; chapters register here as they are written
_MODULES = {"reduction": "reduction"}

__all__ = ["Chapter", "CheckResult", "Library", "Model", "Variant", "get", "names"]


def names() -> list[str]:
    return list(_MODULES)


def get(name: str) -> Chapter:
    if name not in _MODULES:
        raise KeyError(f"no chapter {name!r}; the chapters are: {', '.join(names())}")
    return importlib.import_module(f"{__name__}.{_MODULES[name]}").CHAPTER
