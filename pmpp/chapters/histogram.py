"""Chapter 9 - Parallel histogram (PMPP 4th ed.), with the atomics lessons (9.3 and FastAtomicAdd).

Two problems share the chapter; a problem's ``"op"`` says which.

* ``op="histogram"`` (the default): count ``n`` bytes into bins, ``{"n", "bins", "input"}``.
  ``bins=7`` is the book's text case: the lowercase letters a-z, in seven bins of four letters
  (alphabet_position / 4: a-d, e-h, ..., y-z), every other byte ignored. ``bins=256`` counts every
  byte value. Counts are integers and must equal ``numpy.bincount`` exactly. ``input`` is
  ``"uniform"`` (random bytes), ``"text"`` (sentences of common English words,
  :func:`english_text`) or ``"skewed"`` (one byte value, ``'e'``, in 90% of the places).
* ``op="dot"``: the dot product of two float16 vectors of ``n`` elements, each of ``atomics``
  threads adding its partial sum into ONE result with an atomicAdd - on ``__half`` (a
  compare-and-swap loop), on ``__half2`` with a zero partner lane (FastAtomicAdd) and on ``float``.
  The inputs make every partial sum an integer that float16 holds exactly (:func:`make_dot_inputs`),
  so these results too must equal the reference exactly. The dot variants run at their own size,
  ``n = DOT_N`` (2^22 elements, small enough that the atomics dominate the time).

Every kernel in ``kernels/histogram/`` handles any ``n`` (and, for the vectorized ones, any
alignment). The histogram kernels 01-11 are written for either binning (``NUM_BINS`` 7 or 256);
each is registered here for the case it is measured on: the book's steps (01-08) and the register
counters (12, letters only) on text into 7 bins, the 256-bin kernels (09-11) on uniform bytes.
:func:`variant_for` re-targets one to another binning or input.
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

import pmpp
from pmpp.chapters.base import BenchSet, Chapter, CheckResult, Library, Model, Variant
from pmpp.chapters.draw import generator_for, host, on_host
from pmpp.libraries import cub

BLOCK_DIM = 256            # threads per block of the book's kernels (01-08) and the dot products
COARSE_FACTOR = 32         # bytes per thread of 05-08
VECTOR_BLOCK_DIM = 512     # 09-12: threads per block ...
BLOCKS_PER_SM = 2          # ... blocks per SM (the grid), promised to the compiler by __launch_bounds__
UNROLL = 4                 # ... 16-byte loads in flight per thread
MAX_N = 2 ** 31            # the largest n every kernel indexes without unsigned overflow

LETTERS = 7                # the book's bins: a-d, e-h, i-l, m-p, q-t, u-x, y-z
BYTES = 256
INPUTS = ("uniform", "text", "skewed")
DOMINANT_BYTE = ord("e")   # the skewed input's dominant value ...
DOMINANT_PERCENT = 90      # ... and its share
POISON = 0xFFFFFFFF        # every bin of an output before the launch: a kernel must start from 0

DOT_N = 2 ** 22            # the dot product's length: 16 MB of inputs, so that the atomics dominate
DOT_ATOMICS = 2 ** 16      # threads of the dot product, each one atomicAdd into the result
HALF_EXACT = 2 ** 11       # float16 holds every integer up to 2048 exactly

# The "text" input: sentences of common English words, drawn at about the frequencies they have in
# English prose (the word of rank r with weight 1 / (r + 2), as Zipf's law has it). Made from the
# seed alone, so the same on every machine and Python; the letters have English's frequencies
# (e, t, a, o, i, n, s, h, r the commonest) and words their real spelling, so runs of letters in one
# bin are as long as in prose.
WORDS = tuple("""
the of and to a in is it you that he was for on are with as his they be at one have this from
or had by not word but what some we can out other were all there when up use your how said an each
she which do their time if will way about many then them write would like so these her long make
thing see him two has look more day could go come did number sound no most people my over know
water than call first who may down side been now find any new work part take get place made live
where after back little only round man year came show every good me give our under name very
through just form sentence great think say help low line differ turn cause much mean before move
right boy old too same tell does set three want air well also play small end put home read hand
port large spell add even land here must big high such follow act why ask men change went light
kind off need house picture try us again animal point mother world near build self earth father
head stand own page should country found answer school grow study still learn plant cover food sun
four between state keep eye never last let thought city tree cross farm hard start might story saw
far sea draw left late run while press close night real life few north open seem together next
white children begin got walk example ease paper group always music those both mark often letter
until mile river car feet care second book carry took science eat room friend began idea fish
mountain stop once base hear horse cut sure watch color face wood main enough plain girl usual
young ready above ever red list though feel talk bird soon body dog family direct pose leave song
measure door product black short numeral class wind question happen complete ship area half rock
order fire south problem piece told knew pass since top whole king space heard best hour better
true during hundred five remember step early hold west ground interest reach fast verb sing listen
six table travel less morning ten simple several vowel toward war lay against pattern slow center
love person money serve appear road map rain rule govern pull cold notice voice unit power town fine
certain fly fall lead cry dark machine note wait plan figure star box noun field rest correct able
pound done beauty drive stood contain front teach week final gave green quick develop ocean warm
free minute strong special mind behind clear tail produce fact street inch multiply nothing course
stay wheel full force blue object decide surface deep moon island foot system busy test record boat
common gold possible plane stead dry wonder laugh thousand ago ran check game shape equate hot miss
brought heat snow tire bring yes distant fill east paint language among
""".split())


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------

TEXT_BYTES = 1 << 20   # the text is made up to this length, then repeated


def english_text(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` bytes of English-like text from ``rng``: sentences of 4 to 17 :data:`WORDS`, a capital
    letter first, a comma now and then, a full stop last, paragraphs of 3 to 7 sentences; made up
    to :data:`TEXT_BYTES`, then repeated."""
    size = min(n, TEXT_BYTES)
    count = size // 3 + 64                      # more words than the text can hold
    weights = 1.0 / (np.arange(len(WORDS)) + 2.0)
    words = rng.choice(len(WORDS), size=count, p=weights / weights.sum())
    comma = rng.random(count) < 0.06
    sentence_ends = np.cumsum(rng.integers(4, 18, size=count))
    paragraph_ends = set(np.cumsum(rng.integers(3, 8, size=count)).tolist())
    parts, length, sentence, start = [], 0, 0, True
    for k in range(count):
        word = WORDS[words[k]].capitalize() if start else WORDS[words[k]]
        start = k + 1 == sentence_ends[sentence]
        if start:
            sentence += 1
            word += ".\n\n" if sentence in paragraph_ends else ". "
        else:
            word += ", " if comma[k] else " "
        parts.append(word)
        length += len(word)
        if length >= size:
            break
    text = np.frombuffer("".join(parts).encode(), np.uint8)[:size]
    return np.resize(text, n)


def make_bytes(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` bytes (uint8) of one of :data:`INPUTS`, fresh from ``rng`` (NumPy's, or for "uniform"
    and "skewed" CuPy's): "text" is :func:`english_text`."""
    if kind == "uniform":
        return rng.integers(0, 256, size=n, dtype=np.uint8)
    if kind == "text":
        return english_text(n, rng)
    if kind == "skewed":
        x = rng.integers(0, 256, size=n, dtype=np.uint8)
        x[rng.integers(0, 100, size=n, dtype=np.uint8) < DOMINANT_PERCENT] = DOMINANT_BYTE
        return x
    raise ValueError(f"input must be one of {INPUTS}, got {kind!r}")


def make_dot_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """``{"a", "b"}``: float16 vectors of ``n`` elements whose products are -1, 0 or +1.

    ``a`` is dense (+-1); ``b`` is +-1 with probability ``rho = min(1, atomics / n)``, else 0, so
    that about ``min(n, atomics)`` products are nonzero. Every partial sum, in any order of
    additions, is then an integer; float16 holds it exactly while its magnitude is at most 2048,
    so every variant - float16 atomics included - must return the float64 reference exactly.
    That holds for sure while ``n <= 2048``; beyond, the partial sums are a symmetric random walk
    of about ``atomics`` steps (standard deviation 256 for 2^16), and :func:`dot_inexact_probability`
    bounds the chance that one of them leaves [-2048, 2048]: below 1e-12."""
    n = problem["n"]
    a = np.where(rng.integers(0, 2, size=n, dtype=np.uint8) == 1, 1.0, -1.0).astype(np.float16)
    nonzero = rng.random(n) < min(1.0, atomics(problem) / max(n, 1))
    b = np.where(nonzero, np.where(rng.integers(0, 2, size=n, dtype=np.uint8) == 1, 1.0, -1.0), 0.0)
    return {"a": xp.asarray(a), "b": xp.asarray(b.astype(np.float16))}


def make_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """Histogram: ``{"data": n bytes, "histo": bins uint32 set to POISON}``. Dot: :func:`make_dot_inputs`."""
    if problem.get("op", "histogram") == "dot":
        return make_dot_inputs(problem, xp, rng)
    data = _bytes_on(xp, problem["input"], problem["n"], rng)
    return {"data": xp.asarray(data), "histo": xp.full((problem["bins"],), POISON, dtype=np.uint32)}


def _bytes_on(xp, kind: str, n: int, rng: np.random.Generator):
    """:func:`make_bytes` drawn where ``xp`` keeps them: on a GPU random bytes are drawn there, and
    the text is made on the host up to TEXT_BYTES and repeated there."""
    if on_host(xp):
        return make_bytes(kind, n, rng)
    if kind != "text":
        return make_bytes(kind, n, generator_for(xp, rng))
    text = xp.asarray(english_text(min(n, TEXT_BYTES), rng))
    return xp.tile(text, -(-n // text.size))[:n] if n else text


def atomics(problem: Mapping[str, Any]) -> int:
    """Threads of a dot product, each with one atomicAdd (fewer if n is smaller)."""
    return max(1, min(problem["n"], problem.get("atomics", DOT_ATOMICS)))


# --------------------------------------------------------------------------------------------
# Reference and checking
# --------------------------------------------------------------------------------------------

def byte_counts(data) -> np.ndarray:
    """``numpy.bincount(data, minlength=256)`` in chunks (bincount makes an int64 copy of its input);
    on a GPU ``cupy.bincount`` there (exact integer counts), and the 256 counts brought back."""
    if not on_host(pmpp.get_array_module(data)):
        import cupy
        return host(cupy.bincount(data.reshape(-1), minlength=BYTES)).astype(np.int64)
    data = np.asarray(data).reshape(-1)
    counts = np.zeros(BYTES, dtype=np.int64)
    for start in range(0, data.size, 1 << 24):
        counts += np.bincount(data[start:start + (1 << 24)], minlength=BYTES)
    return counts


def fold_letters(counts, xp=np):
    """The 7 letter bins from the 256 byte counts: bins 0-5 of four letters, 6 of y and z."""
    first = counts[ord("a"):ord("y")].reshape(6, 4).sum(axis=1)
    return xp.concatenate([first, counts[ord("y"):ord("z") + 1].sum(keepdims=True)])


def reference(problem: Mapping[str, Any], inputs: Mapping[str, Any]):
    """Histogram: the exact counts (int64). Dot: the float64 dot product (an integer here)."""
    if problem.get("op", "histogram") == "dot":
        a, b = (np.asarray(pmpp.asnumpy(inputs[k]), np.float64) for k in ("a", "b"))
        return np.float64(a @ b)
    counts = byte_counts(inputs["data"])
    return fold_letters(counts) if problem["bins"] == LETTERS else counts


def check(output, ref, problem: Mapping[str, Any]) -> CheckResult:
    """Exact: every bin equal to the reference; for a dot product, the result at ``target`` equal
    to the reference and the other element of the output (the partner lane) still 0."""
    out = np.asarray(pmpp.asnumpy(output)).reshape(-1)
    if problem.get("op", "histogram") == "dot":
        target = problem.get("target", 0)
        want = np.zeros(out.size)
        want[target] = float(ref)
        got = out.astype(np.float64)
        wrong = int(np.sum(got != want)) if out.size == 2 else 2
        return CheckResult(wrong == 0, float(wrong), 0.0,
                           f"dot {got.tolist()}, expected {want.tolist()} (result at index {target})")
    expected = np.asarray(ref)
    if out.shape != expected.shape:
        return CheckResult(False, math.inf, 0.0, f"expected {expected.size} bins, got shape {out.shape}")
    wrong = np.flatnonzero(out.astype(np.int64) != expected)
    detail = "all bins exact" if wrong.size == 0 else (
        f"{wrong.size} of {expected.size} bins wrong, e.g. bin {wrong[0]}: "
        f"got {int(out[wrong[0]])}, expected {int(expected[wrong[0]])}")
    return CheckResult(wrong.size == 0, float(wrong.size), 0.0, detail)


# --------------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------------

def _setting(module, name: str, default: int) -> int:
    return int(module.defines.get(name, default))


def _zeroed(histo):
    """The output, set to 0 (the kernels accumulate into it): a memset, on CuPy one cudaMemsetAsync."""
    memset_async = getattr(getattr(histo, "data", None), "memset_async", None)   # CuPy's MemoryPointer
    if memset_async is not None:
        memset_async(0, histo.nbytes)
    else:
        histo.fill(0)
    return histo


def _prepared(module, problem, inputs):
    """(data, n, histo zeroed): after checking that the module counts the problem's bins."""
    built = _setting(module, "NUM_BINS", LETTERS)
    if built != problem["bins"]:
        raise ValueError(f"{module.filename} was built with NUM_BINS={built} but the problem has "
                         f"{problem['bins']} bins: load it with defines={{'NUM_BINS': {problem['bins']}}} "
                         "(histogram.variant_for does)")
    data = inputs["data"]
    n = int(data.size)
    if n > MAX_N:
        raise ValueError(f"n={n} is more than the kernels index ({MAX_N})")
    return data, n, _zeroed(inputs["histo"])


def _per_byte(kernel: str, *, coarsened: bool = False, private_copies: bool = False):
    """01-08: ``kernel(data, length, histo)`` on ceil(n / (BLOCK_DIM * bytes per thread)) blocks:
    one byte per thread, or COARSE_FACTOR if ``coarsened``. ``private_copies`` (02): histo holds a
    zeroed copy per block; the result is copy 0."""

    def launch(module, problem, inputs):
        data, n, histo = _prepared(module, problem, inputs)
        if n == 0:
            return histo
        per_thread = _setting(module, "COARSE_FACTOR", COARSE_FACTOR) if coarsened else 1
        grid = -(-n // (BLOCK_DIM * per_thread))
        if private_copies:
            histo = pmpp.get_array_module(data).zeros(grid * problem["bins"], dtype=np.uint32)
        module.get_function(kernel)(grid, BLOCK_DIM, (data, np.uint32(n), histo))
        return histo[:problem["bins"]]

    return launch


def vector_grid(module, n: int) -> int:
    """09-12: BLOCKS_PER_SM blocks per SM - all resident at once, each thread striding through
    the input - or fewer if n is small (no block without a step of UNROLL uint4s per thread)."""
    block = _setting(module, "BLOCK_DIM", VECTOR_BLOCK_DIM)
    steps = -(-(n // 16) // (block * _setting(module, "UNROLL", UNROLL)))
    return max(1, min(steps, int(module.device_sm_count) * _setting(module, "BLOCKS_PER_SM", BLOCKS_PER_SM)))


def _vectorized(kernel: str):
    """09-12: ``kernel(data, length, histo)`` on :func:`vector_grid` blocks of BLOCK_DIM threads."""

    def launch(module, problem, inputs):
        data, n, histo = _prepared(module, problem, inputs)
        if n:
            block = _setting(module, "BLOCK_DIM", VECTOR_BLOCK_DIM)
            module.get_function(kernel)(vector_grid(module, n), block, (data, np.uint32(n), histo))
        return histo

    return launch


def _dot(kernel: str, dtype, *, fast: bool = False):
    """13-15: one launch of ``atomics`` threads; each adds its partial sum into ``out[target]`` of a
    zeroed 2-element output (the target and its partner lane). The fast variant gets the whole
    output with ``offset=target`` and ``length=2``, as PyTorch's fastAtomicAdd does."""

    def launch(module, problem, inputs):
        a, b = inputs["a"], inputs["b"]
        n = int(a.size)
        target = int(problem.get("target", 0))
        out = pmpp.get_array_module(a).zeros(2, dtype=dtype)
        if n:
            k = module.get_function(kernel)
            grid = -(-atomics(problem) // BLOCK_DIM)
            args = (a, b, np.uint32(n), out, np.uint32(target), np.uint32(out.size)) if fast else \
                (a, b, np.uint32(n), out[target:])
            k(grid, BLOCK_DIM, args)
        return out

    return launch


# --------------------------------------------------------------------------------------------
# Models: the bytes that must move, and the book's arithmetic of atomics
# --------------------------------------------------------------------------------------------

def _histogram_model(problem) -> Model:
    """One operation (classify, count) per input byte; n bytes read, the bins written."""
    return Model(flops=float(problem["n"]), bytes=float(problem["n"] + 4 * problem["bins"]))


def _private_global_model(problem) -> Model:
    """As the others, plus the per-block copies: zeroed (written) and read back once."""
    copies = -(-problem["n"] // BLOCK_DIM) * problem["bins"]
    base = _histogram_model(problem)
    return Model(flops=base.flops, bytes=base.bytes + 2 * 4 * copies)


def _dot_model(problem) -> Model:
    """A multiply and an add per element; two float16 vectors read."""
    return Model(flops=2.0 * problem["n"], bytes=4.0 * problem["n"] + 4)


@dataclass(frozen=True)
class AtomicsModel:
    """PMPP 9.3's arithmetic: DRAM bandwidth against the throughput of atomics on one address.

    A DRAM system of ``channels`` channels, each ``bytes_per_transfer`` wide, transferring twice a
    clock (double data rate) at ``clock_hz``: 8 x 8 B x 2 x 1 GHz = 128 GB/s, 32 G four-byte elements
    a second. An atomic read-modify-write of one address takes a DRAM read and a write,
    ``latency_cycles`` in all, and the next atomic on that address must wait for it: 400 cycles at
    1 GHz is 400 ns, 2.5 M atomics a second - on ``addresses`` different addresses at most that many
    times more (7 bins: 17.5 M/s)."""

    clock_hz: float = 1e9
    channels: int = 8
    bytes_per_transfer: int = 8
    transfers_per_clock: int = 2
    latency_cycles: float = 400

    @property
    def dram_bytes_per_s(self) -> float:
        return self.channels * self.bytes_per_transfer * self.transfers_per_clock * self.clock_hz

    def elements_per_s(self, element_bytes: int = 4) -> float:
        return self.dram_bytes_per_s / element_bytes

    @property
    def ns_per_atomic(self) -> float:
        return self.latency_cycles / self.clock_hz * 1e9

    def atomics_per_s(self, addresses: int = 1) -> float:
        return addresses * self.clock_hz / self.latency_cycles

    def seconds(self, updates: float, addresses: int = 1) -> float:
        """The time for ``updates`` atomics spread evenly over ``addresses``, at this throughput."""
        return updates / self.atomics_per_s(addresses)


def sectors_per_request(partition: str, coarse_factor: int = COARSE_FACTOR, sector: int = 32) -> int:
    """32-byte sectors that one warp-wide 1-byte load touches in 05 (contiguous: lane l reads byte
    l * coarse_factor + j) and 06 (interleaved: lane l reads byte base + l)."""
    stride = {"contiguous": coarse_factor, "interleaved": 1}[partition]
    return len({lane * stride // sector for lane in range(32)})


def _warps(data, lanes_apart: int = 1) -> np.ndarray:
    """The bytes that the 32 lanes of each warp instruction read, one row per instruction: lanes
    ``lanes_apart`` bytes apart (1: a warp reads 32 consecutive bytes; 16: each lane its own uint4,
    byte k of all 32 in instruction k)."""
    x = np.asarray(pmpp.asnumpy(data)).reshape(-1)
    group = 32 * lanes_apart
    x = x[: x.size // group * group].reshape(-1, 32, lanes_apart)
    return x.transpose(0, 2, 1).reshape(-1, 32).astype(np.int64)


def _most_per_row(keys: np.ndarray, width: int) -> np.ndarray:
    """For each row: how often its most frequent key in [0, width) occurs (keys >= width ignored)."""
    keys = np.minimum(keys, width)
    rows = np.repeat(np.arange(keys.shape[0]), keys.shape[1])
    counts = np.bincount(rows * (width + 1) + keys.reshape(-1), minlength=keys.shape[0] * (width + 1))
    return counts.reshape(keys.shape[0], width + 1)[:, :width].max(axis=1)


def warp_collisions(data, bins: int) -> float:
    """For 01 (one thread per byte): the mean over warps of the largest number of its 32 lanes that
    update the same bin at once - how many updates of one address the warp's single atomic
    instruction asks for. 1 is no collision, 32 a warp-wide pile-up."""
    x = _warps(data)
    if bins == LETTERS:
        position = x - ord("a")
        x = np.where((position >= 0) & (position < 26), position // 4, LETTERS)   # LETTERS: not counted
    return float(_most_per_row(x, bins).mean())


def bank_conflicts(data, per_lane: bool = False) -> float:
    """For the 256-bin shared-memory variants: the mean over warp instructions of the largest
    number of DIFFERENT words that one of the 32 banks is asked for - the times the instruction is
    replayed. 09/10: lane l adds to word ``bin`` (bank bin % 32) of one copy, for byte k of its own
    uint4 (lanes 16 bytes apart); 11 (``per_lane``): word bin * 32 + l, always bank l."""
    words = _warps(data, lanes_apart=16)
    if per_lane:
        words = words * 32 + np.arange(32)
    words.sort(axis=1)
    first = np.ones(words.shape, dtype=bool)
    first[:, 1:] = words[:, 1:] != words[:, :-1]                    # each word once
    banks = np.where(first, words % 32, 32)                          # 32: a repeat, not counted again
    return float(_most_per_row(banks, 32).mean())


def dot_inexact_probability(problem: Mapping[str, Any]) -> float:
    """An upper bound on the chance that some partial sum of a dot product of
    :func:`make_dot_inputs` leaves [-2048, 2048], where float16 stops holding every integer.

    Whatever the order of the atomics, the partial sums add up the threads' partial sums, which
    are independent and symmetric (flip the signs of a thread's a[i] and its sum flips), in an
    order that does not depend on their signs. Levy's inequality: the chance that the largest
    partial sum reaches x is at most twice the chance that the total does. The total is a sum of
    M terms +-1, M the number of nonzero products (M <= n; binomial with mean mu = min(n, atomics)).
    Hoeffding: P(|total| >= x | M) <= 2 exp(-x^2 / 2M); Chernoff: P(M >= 1.1 mu) <= exp(-0.01 mu / 2.1).
    0 when n <= 2048 (no sum of n terms of size 1 exceeds 2048)."""
    n = problem["n"]
    if n <= HALF_EXACT:
        return 0.0
    mu = min(n, atomics(problem))
    x = HALF_EXACT + 1
    with_m_at_most_n = 2 * 2 * math.exp(-x * x / (2 * n))
    with_m_near_mu = math.exp(-0.01 * mu / 2.1) + 2 * 2 * math.exp(-x * x / (2 * 1.1 * mu))
    return min(1.0, with_m_at_most_n, with_m_near_mu)


# --------------------------------------------------------------------------------------------
# Library routines: the bar to beat
# --------------------------------------------------------------------------------------------

def _fold(counts, problem, xp):
    return fold_letters(counts, xp) if problem["bins"] == LETTERS else counts


def _cupy_run(problem, inputs):
    """cupy.bincount (one global atomicAdd per byte); for letters the 7 bins folded from the 256."""
    import cupy
    return _fold(cupy.bincount(cupy.asarray(inputs["data"]), minlength=BYTES), problem, cupy)


def _torch_run(problem, inputs):
    import cupy
    import torch
    counts = torch.bincount(torch.from_dlpack(cupy.asarray(inputs["data"])), minlength=BYTES)
    return _fold(cupy.from_dlpack(counts), problem, cupy)


def _cub_run(problem, inputs):
    """cub::DeviceHistogram::HistogramEven into the poisoned bins the kernels write (CUB zeroes them)."""
    return cub.histogram(inputs["data"], inputs["histo"])


def _numpy_run(problem, inputs):
    return _fold(np.bincount(np.asarray(inputs["data"]), minlength=BYTES), problem, np)


def _cupy_available(backend: str) -> bool:
    return backend == "cupy"


def _torch_available(backend: str) -> bool:
    if backend != "cupy" or importlib.util.find_spec("torch") is None:
        return False
    import torch
    return torch.cuda.is_available()


# --------------------------------------------------------------------------------------------
# The chapter
# --------------------------------------------------------------------------------------------

_TEXT = {"bins": LETTERS, "input": "text"}
_UNIFORM = {"bins": BYTES, "input": "uniform"}
_DOT = {"op": "dot", "n": DOT_N}
_L = {"NUM_BINS": LETTERS}
_L_C = {"NUM_BINS": LETTERS, "COARSE_FACTOR": COARSE_FACTOR}
_VECTOR = {"BLOCK_DIM": VECTOR_BLOCK_DIM, "BLOCKS_PER_SM": BLOCKS_PER_SM, "UNROLL": UNROLL}
_B_V = {"NUM_BINS": BYTES, **_VECTOR}
_L_V = {"NUM_BINS": LETTERS, **_VECTOR}

VARIANTS = (
    Variant("01_basic", "9.2 basic: one global atomicAdd per byte", "PMPP 9.2",
            _per_byte("histo_kernel"), _histogram_model, defines=_L, problem=_TEXT),
    Variant("02_private_global", "9.4 a private copy per block, in global memory", "PMPP 9.4",
            _per_byte("histo_private_global_kernel", private_copies=True), _private_global_model,
            defines=_L, problem=_TEXT),
    Variant("03_private_shared_racy", "shared-memory bins without atomics: a race", "PMPP 9.2",
            _per_byte("histo_private_racy_kernel"), _histogram_model, defines=_L, problem=_TEXT, racy=True),
    Variant("04_private_shared", "9.4 private bins in shared memory", "PMPP 9.4",
            _per_byte("histo_private_kernel"), _histogram_model, defines=_L, problem=_TEXT),
    Variant("05_contiguous", "9.5 coarsening, contiguous partition (uncoalesced)", "PMPP 9.5",
            _per_byte("histo_contiguous_kernel", coarsened=True), _histogram_model,
            defines=_L_C, problem=_TEXT),
    Variant("06_interleaved", "9.5 coarsening, interleaved partition (coalesced)", "PMPP 9.5",
            _per_byte("histo_interleaved_kernel", coarsened=True), _histogram_model,
            defines=_L_C, problem=_TEXT),
    Variant("07_aggregation", "9.6 aggregation of runs of one bin", "PMPP 9.6",
            _per_byte("histo_aggregated_kernel", coarsened=True), _histogram_model,
            defines=_L_C, problem=_TEXT),
    Variant("08_warp_aggregated", "warp-aggregated atomics (__match_any_sync)", "beyond the book",
            _per_byte("histo_warp_aggregated_kernel", coarsened=True), _histogram_model,
            defines=_L_C, problem=_TEXT),
    Variant("09_vectorized", "16-byte loads, a grid that fills the GPU once", "beyond the book",
            _vectorized("histo_vectorized_kernel"), _histogram_model, defines=_B_V, problem=_UNIFORM),
    Variant("10_per_warp", "per-warp sub-histograms in shared memory", "beyond the book",
            _vectorized("histo_per_warp_kernel"), _histogram_model, defines=_B_V, problem=_UNIFORM),
    Variant("11_per_lane", "a copy per lane: no bank conflicts", "beyond the book",
            _vectorized("histo_per_lane_kernel"), _histogram_model, defines=_B_V, problem=_UNIFORM),
    Variant("12_register_counts", "7 bins in registers, no atomics in the loop", "beyond the book",
            _vectorized("histo_register_counts_kernel"), _histogram_model, defines=_L_V, problem=_TEXT,
            min_arch=80),
    Variant("13_dot_half_atomic", "dot: atomicAdd(__half*), a CAS loop", "PMPP 9.3 + FastAtomicAdd",
            _dot("dot_half_atomic_kernel", np.float16), _dot_model, problem=_DOT),
    Variant("14_dot_fast_atomic_add", "dot: __half2 atomic, zero partner lane", "FastAtomicAdd",
            _dot("dot_fast_atomic_add_kernel", np.float16, fast=True), _dot_model, problem=_DOT),
    Variant("15_dot_float_atomic", "dot: atomicAdd(float*), native", "FastAtomicAdd",
            _dot("dot_float_atomic_kernel", np.float32), _dot_model, problem=_DOT),
)

# What `pmpp tune` may set for 09-12: the block, the blocks the grid holds per SM (each thread strides
# through the input) and the 16-byte loads in flight per thread; a legal setting fits an SM's 2048
# threads and, for 11's 32 copies of the bins, the H100's and H200's 227 KB of shared memory.
VECTOR_TUNABLES = {"BLOCK_DIM": (128, 256, 512, 1024), "BLOCKS_PER_SM": (1, 2, 3, 4, 6, 8), "UNROLL": (1, 2, 4, 8)}


def _fits_an_sm(d: Mapping[str, Any]) -> bool:
    return d["BLOCK_DIM"] * d["BLOCKS_PER_SM"] <= 2048


def _per_lane_fits_an_sm(d: Mapping[str, Any]) -> bool:
    return _fits_an_sm(d) and 32 * d["NUM_BINS"] * 4 * d["BLOCKS_PER_SM"] <= 227 * 1024


VARIANTS = tuple(replace(v, tunables=VECTOR_TUNABLES, legal=_per_lane_fits_an_sm if v.name == "11_per_lane" else _fits_an_sm)
                 if v.name in ("09_vectorized", "10_per_warp", "11_per_lane", "12_register_counts") else v
                 for v in VARIANTS)
DOT_VARIANTS = tuple(v.name for v in VARIANTS if v.problem.get("op") == "dot")
LETTERS_ONLY = ("12_register_counts",)     # kernels that count letters only (NUM_BINS 7)


def binnings(variant: Variant) -> tuple[int, ...]:
    """The bins a histogram variant can count: (7,) or (7, 256); () for a dot product."""
    if variant.name in DOT_VARIANTS:
        return ()
    return (LETTERS,) if variant.name in LETTERS_ONLY else (LETTERS, BYTES)


def variant_for(variant: Variant, *, bins: int | None = None, input: str | None = None) -> Variant:
    """The variant re-targeted: built with ``NUM_BINS=bins`` and run on ``input``."""
    bins = variant.problem["bins"] if bins is None else bins
    if bins not in binnings(variant):
        raise ValueError(f"{variant.name} counts {binnings(variant) or 'no'} bins, not {bins}")
    problem = {**variant.problem, "bins": bins, **({"input": input} if input else {})}
    return replace(variant, defines={**variant.defines, "NUM_BINS": bins}, problem=problem)


def describe(problem: Mapping[str, Any]) -> str:
    if problem.get("op", "histogram") == "dot":
        return f"dot of two float16 vectors, n={problem['n']}, {atomics(problem)} atomicAdds on one address"
    what = {"uniform": "uniform random bytes", "text": "bytes of English text",
            "skewed": f"skewed bytes ({DOMINANT_PERCENT}% '{chr(DOMINANT_BYTE)}')"}[problem["input"]]
    return f"n={problem['n']} {what}, {problem['bins']} bins"


def _test_cases(backend: str):
    """Every histogram variant (the dot products have tests of their own) with each of its
    binnings, at each test size (and on a GPU the GPU size)."""
    sizes = list(CHAPTER.test_sizes) + ([CHAPTER.problems["gpu"]["n"]] if backend == "cupy" else [])
    for variant in CHAPTER.variants:
        if variant.racy or not binnings(variant):
            continue
        for bins in binnings(variant):
            binned = variant_for(variant, bins=bins)
            for n in sizes:
                yield binned, {**CHAPTER.problems["cpu"], **binned.problem, "n": n}


CHAPTER = Chapter(
    name="histogram",
    title="Histogram (PMPP ch. 9) and atomics",
    kernel_dir="histogram",
    variants=VARIANTS,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    problems={"gpu": {"n": 2 ** 28, **_UNIFORM}, "cpu": {"n": 2 ** 20, **_UNIFORM}},
    test_sizes=(1, 31, 1000, 65_537, 2 ** 20 + 3),
    test_cases=_test_cases,
    cpu_largest=frozenset({"01_basic", "06_interleaved", "11_per_lane", "12_register_counts"}),
    library=(
        Library("cub::DeviceHistogram::HistogramEven", _cub_run, cub.available, why_not=cub.why_not_on_gpu),
        Library("cupy.bincount", _cupy_run, _cupy_available),
        Library("torch.bincount", _torch_run, _torch_available, imports=("torch",)),
        Library("numpy.bincount", _numpy_run, lambda backend: backend == "cpu"),
    ),
    describe=describe,
    # `pmpp bench --all-problems` records, beside uniform bytes: the skewed input, where contention
    # bites, counted into 256 bins by every kernel that can.
    bench=(BenchSet("skewed", ({"n": 2 ** 28, "bins": BYTES, "input": "skewed"},),
                    tuple(variant_for(v, bins=BYTES, input="skewed") for v in VARIANTS if BYTES in binnings(v))),),
)
