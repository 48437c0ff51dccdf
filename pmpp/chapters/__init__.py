"""The workbook's chapters, by name, in teaching order."""
from __future__ import annotations

import importlib
from pathlib import Path

from .base import BenchSet, Chapter, CheckResult, Library, Model, Variant

# Teaching order; a chapter is listed once its module (pmpp/chapters/<name>.py) exists.
ORDER = ("reduction", "scan", "histogram", "convolution", "implicit_gemm", "stencil", "pooling",
         "elementwise", "upsample")

__all__ = ["BenchSet", "Chapter", "CheckResult", "Library", "Model", "Variant", "get", "names"]


def names() -> list[str]:
    here = Path(__file__).parent
    return [name for name in ORDER if (here / f"{name}.py").exists()]


def get(name: str) -> Chapter:
    if name not in names():
        raise KeyError(f"no chapter {name!r}; the chapters are: {', '.join(names())}")
    return importlib.import_module(f"{__name__}.{name}").CHAPTER
