"""How alike a class's submissions are: winnowed fingerprints of their tokens, as MOSS computes
them (Schleimer, Wilkerson and Aiken, "Winnowing: local algorithms for document fingerprinting",
SIGMOD 2003), with the code every student was given taken out first.

    pairs = similar_pairs({"ann": text_a, "ben": text_b, ...}, given=[starter_code])
    # [("ann", "ben", 0.93), ...]: the share of the smaller one's fingerprints the other has too

Identifiers and numbers are replaced by one token each and comments and whitespace dropped, so
renaming variables, reformatting or recommenting does not hide a copy. A high share is a reason
to look, never a verdict by itself: two short right answers to a small exercise can be alike.
"""
from __future__ import annotations

import hashlib
import itertools
import re
from typing import Iterable, Mapping

K = 12          # tokens per k-gram: shorter matches are noise (a for loop's header)
WINDOW = 8      # k-grams per winnowing window: any match of K + WINDOW - 1 tokens is found
THRESHOLD = 0.8

_TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
  | (?P<number>\b\d[\w.]*|\.\d[\w]*)
  | (?P<word>[A-Za-z_]\w*)
  | (?P<op>\S)
""", re.S | re.X)

# Kept as themselves: what the kernel does, as opposed to what its author named things.
_KEYWORDS = frozenset("""
    if else for while do return break continue switch case default goto sizeof const volatile
    unsigned signed int float double char short long bool void struct union template typename
    static inline auto true false __global__ __device__ __host__ __shared__ __constant__
    __syncthreads __syncwarp __forceinline__ __restrict__ extern
    threadIdx blockIdx blockDim gridDim warpSize atomicAdd atomicMax atomicMin atomicCAS atomicExch
    __shfl_sync __shfl_down_sync __shfl_up_sync __shfl_xor_sync __ballot_sync
    float2 float4 int2 int4 uint4 __half __half2
""".split())


def tokens(text: str) -> list[str]:
    """The text as tokens: keywords and operators as they are, every other name "V", every number
    "N", every string "S"; comments and whitespace dropped."""
    found = []
    for match in _TOKEN.finditer(text):
        kind, value = match.lastgroup, match.group()
        if kind == "comment":
            continue
        if kind == "word":
            found.append(value if value in _KEYWORDS else "V")
        else:
            found.append({"number": "N", "string": "S"}.get(kind, value))
    return found


def fingerprints(text: str, k: int = K, window: int = WINDOW) -> set[int]:
    """The winnowed hashes of the text's k-grams of tokens: in every window of ``window``
    consecutive k-gram hashes, the smallest."""
    toks = tokens(text)
    hashes = [int.from_bytes(hashlib.blake2b(" ".join(toks[i:i + k]).encode(), digest_size=8).digest(), "big")
              for i in range(len(toks) - k + 1)]
    if len(hashes) <= window:
        return set(hashes)
    chosen = set()
    for start in range(len(hashes) - window + 1):
        chosen.add(min(hashes[start:start + window]))
    return chosen


def similar_pairs(texts: Mapping[str, str], given: Iterable[str] = (), threshold: float = THRESHOLD,
                  ) -> list[tuple[str, str, float]]:
    """(name, name, share) for every pair of ``texts`` whose fingerprints, those of the ``given``
    code (the starter file, the stub) taken out, overlap in at least ``threshold`` of the smaller
    set; most alike first. Identical texts share 1.0."""
    common = set().union(*(fingerprints(g) for g in given)) if given else set()
    prints = {name: fingerprints(text) - common for name, text in texts.items()}
    pairs = []
    for a, b in itertools.combinations(sorted(prints), 2):
        smaller = min(len(prints[a]), len(prints[b]))
        if not smaller:
            continue
        share = len(prints[a] & prints[b]) / smaller
        if share >= threshold:
            pairs.append((a, b, share))
    return sorted(pairs, key=lambda p: (-p[2], p[0], p[1]))
