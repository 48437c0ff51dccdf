"""Checking kernel launches before they happen: grid and block shapes, and every argument
against the kernel's parameter list. A wrong dtype, a host array passed to the GPU, a Python
float for an ``int`` parameter: each is a clear ``TypeError``/``ValueError``, never a wrong number."""
from __future__ import annotations


import numpy as np

from .source import KernelSignature, Param

# C type -> (NumPy dtype, lanes). Vector types (float4, __half2) are arrays of their lane type.
_CTYPES = {
    "float": ("float32", 1), "double": ("float64", 1),
    "int": ("int32", 1), "signed int": ("int32", 1), "signed": ("int32", 1), "int32_t": ("int32", 1),
    "unsigned int": ("uint32", 1), "unsigned": ("uint32", 1), "uint32_t": ("uint32", 1),
    "long long": ("int64", 1), "long long int": ("int64", 1), "long": ("int64", 1),
    "long int": ("int64", 1), "int64_t": ("int64", 1), "ptrdiff_t": ("int64", 1),
    "unsigned long long": ("uint64", 1), "unsigned long long int": ("uint64", 1),
    "unsigned long": ("uint64", 1), "uint64_t": ("uint64", 1), "size_t": ("uint64", 1),
    "short": ("int16", 1), "int16_t": ("int16", 1),
    "unsigned short": ("uint16", 1), "uint16_t": ("uint16", 1),
    "char": ("int8", 1), "signed char": ("int8", 1), "int8_t": ("int8", 1),
    "unsigned char": ("uint8", 1), "uint8_t": ("uint8", 1), "bool": ("bool", 1),
    "__half": ("float16", 1), "half": ("float16", 1),
    "__half2": ("float16", 2), "half2": ("float16", 2),
    "float2": ("float32", 2), "float3": ("float32", 3), "float4": ("float32", 4),
    "double2": ("float64", 2), "int2": ("int32", 2), "int4": ("int32", 4),
    "uint2": ("uint32", 2), "uint4": ("uint32", 4), "char4": ("int8", 4), "uchar4": ("uint8", 4),
}
_ALIGN = {"float2": 8, "float4": 16, "double2": 16, "int2": 8, "int4": 16, "uint2": 8, "uint4": 16,
          "__half2": 4, "half2": 4, "char4": 4, "uchar4": 4, "__nv_bfloat162": 4, "nv_bfloat162": 4}
# bfloat16 has no NumPy dtype: its arrays are uint16 arrays of the bits, or ml_dtypes.bfloat16 ones
_BFLOAT16 = {"__nv_bfloat16": 1, "nv_bfloat16": 1, "__nv_bfloat162": 2, "nv_bfloat162": 2}

MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)


def dim3(value, what: str) -> tuple[int, int, int]:
    """An int or a tuple of 1–3 ints -> (x, y, z), like CUDA's ``dim3``."""
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) for d in dims):
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    if min(dims) < 1:
        raise ValueError(f"{what} {dims} has a dimension < 1: nothing would run "
                         "(for an empty input, skip the launch)")
    return dims


def check_launch(grid, block, shared_mem, max_shared: int) -> tuple[tuple, tuple, int]:
    grid, block = dim3(grid, "grid"), dim3(block, "block")
    for axis, (b, limit) in enumerate(zip(block, MAX_BLOCK)):
        if b > limit:
            raise ValueError(f"block{block}: dimension {'xyz'[axis]} = {b} exceeds CUDA's limit {limit}")
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"block{block} has {threads} threads; CUDA allows at most "
                         f"{MAX_THREADS_PER_BLOCK} per block")
    for axis, (g, limit) in enumerate(zip(grid, MAX_GRID)):
        if g > limit:
            raise ValueError(f"grid{grid}: dimension {'xyz'[axis]} = {g} exceeds CUDA's limit {limit}; "
                             "use a grid-stride loop or another grid dimension")
    if not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
        raise ValueError(f"shared_mem must be a number of bytes >= 0, got {shared_mem!r}")
    if shared_mem > max_shared:
        raise ValueError(f"shared_mem={shared_mem} bytes exceeds this device's {max_shared} bytes "
                         "of shared memory per block")
    return grid, block, int(shared_mem)


def param_dtype(param: Param):
    """(dtype or None if unknown, lanes) of a parameter's element/scalar type."""
    dtype, lanes = _CTYPES.get(param.base, (None, 1))
    return (np.dtype(dtype) if dtype else None), lanes


def convert_args(sig: KernelSignature, args, array_type, backend: str, *, strict: bool = False) -> list:
    """Check each argument against its parameter; return them ready for the backend
    (arrays unchanged, scalars as NumPy scalars of the parameter's exact type). ``strict``: the
    workbook's chapter code launches the kernel, so arguments that do not fit the parameters mean
    the kernel's signature was changed: the error says so, and which signature to keep."""
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple of kernel arguments, got {type(args).__name__}; "
                        f"e.g. k(grid, block, (x, out, n))")
    mismatch = signature_mismatch(sig, args)
    if mismatch and strict:
        raise TypeError(f"the kernel's parameters do not match what the chapter passes: {mismatch}; "
                        f"keep the signature `{expected_signature(sig, args)}`")
    if len(args) != len(sig.params):
        raise TypeError(f"kernel {sig} takes {len(sig.params)} arguments but {len(args)} were given")
    return [_convert(p, a, array_type, backend, sig.name) for p, a in zip(sig.params, args)]


# ---- signatures the chapter code relies on

_DTYPE_CTYPES = {"float32": "float", "float64": "double", "int32": "int", "uint32": "unsigned int",
                 "int64": "long long", "uint64": "unsigned long long", "int16": "short",
                 "uint16": "unsigned short", "int8": "signed char", "uint8": "unsigned char",
                 "bool": "bool", "float16": "__half"}


def _is_array(value) -> bool:
    return hasattr(value, "dtype") and getattr(value, "ndim", 0) > 0


def _fits(param: Param, value) -> bool:
    """Would ``value`` pass for ``param`` by its kind and type (an array for a pointer, a scalar of
    the parameter's type for a value)? Unknown C types fit anything of the right kind."""
    dtype, lanes = param_dtype(param)
    if _is_array(value) or param.pointer:
        return _is_array(value) and param.pointer and (dtype is None or value.dtype == dtype)
    if dtype is None or lanes > 1 or isinstance(value, bool):
        return True
    if isinstance(value, (np.generic, np.ndarray)):
        return value.dtype == dtype
    if isinstance(value, int):
        return dtype.kind in "iufb"
    if isinstance(value, float):
        return dtype.kind == "f"
    return True


def _passed(value) -> str:
    """What an argument is, in C terms: "a float* array (numpy float32)", "an unsigned int"."""
    if _is_array(value):
        ctype = _DTYPE_CTYPES.get(value.dtype.name, f"numpy {value.dtype.name}")
        return f"a {ctype}* array (numpy {value.dtype.name})"
    if isinstance(value, (np.generic, np.ndarray)):
        ctype = _DTYPE_CTYPES.get(value.dtype.name, f"numpy {value.dtype.name}")
        return f"{'an' if ctype[0] in 'aeiou' else 'a'} {ctype} (numpy.{value.dtype.name})"
    return f"a Python {type(value).__name__}"


def signature_mismatch(sig: KernelSignature, args) -> str | None:
    """How the arguments do not fit the kernel's parameters by number or type (None if they do)."""
    if len(args) != len(sig.params):
        return f"{sig.name} has {len(sig.params)} parameters, the chapter passes {len(args)} arguments"
    for i, (param, value) in enumerate(zip(sig.params, args), 1):
        if not _fits(param, value):
            return f"parameter {i} is `{param}`, where the chapter passes {_passed(value)}"
    return None


def expected_signature(sig: KernelSignature, args) -> str:
    """The signature the arguments call for: the workbook's own kernel of that name where it has
    one that fits them, else one made from the arguments' types and the declared names."""
    own = [str(s) for s in _workbook_signatures(sig.name) if signature_mismatch(s, args) is None]
    if len(set(own)) == 1:
        return own[0]
    params = []
    for i, value in enumerate(args):
        declared = sig.params[i] if i < len(sig.params) else None
        name = declared.name if declared else f"arg{i + 1}"
        if declared and _fits(declared, value):
            params.append(str(declared))
        elif _is_array(value):
            const = "const " if declared and declared.const else ""
            params.append(f"{const}{_DTYPE_CTYPES.get(value.dtype.name, value.dtype.name)}* {name}")
        elif isinstance(value, (np.generic, np.ndarray)):
            params.append(f"{_DTYPE_CTYPES.get(value.dtype.name, value.dtype.name)} {name}")
        else:
            params.append(f"{'double' if isinstance(value, float) else 'int'} {name}")
    return f"{sig.name}({', '.join(params)})"


def _workbook_signatures(name: str) -> list[KernelSignature]:
    """Every kernel called ``name`` in the workbook's kernel files (template instances included)."""
    from .source import find_kernels, kernels_dir, signature_for
    found = []
    for path in sorted(kernels_dir().rglob("*.cu")):
        try:
            sig = signature_for(find_kernels(path.read_text()), name)
        except (OSError, ValueError):
            continue
        if sig is not None:
            found.append(sig)
    return found


def _convert(param: Param, value, array_type, backend: str, kernel: str):
    where = f"argument {param.name!r} of {kernel} ({param})"
    if param.pointer:
        return _check_array(param, value, array_type, backend, where)
    return _scalar(param, value, where)


def _check_array(param: Param, value, array_type, backend: str, where: str):
    if not isinstance(value, array_type):
        raise TypeError(f"{where}: expected an array on the {backend} backend "
                        f"({array_type.__module__}.{array_type.__name__}), got {_describe(value)}. "
                        + _move_hint(value, backend))
    if not value.flags.c_contiguous:
        raise ValueError(f"{where}: the array is not C-contiguous (a slice or transpose?); "
                         "pass xp.ascontiguousarray(a)")
    dtype, lanes = param_dtype(param)
    if param.base in _BFLOAT16:
        if value.dtype.itemsize != 2 or value.dtype.kind not in "uV" and value.dtype.name != "bfloat16":
            raise TypeError(f"{where}: the kernel expects bfloat16 elements, which NumPy keeps as uint16 "
                            f"arrays of their bits (or ml_dtypes.bfloat16 arrays), got {value.dtype}")
        dtype, lanes = value.dtype, _BFLOAT16[param.base]
    if dtype is not None and value.dtype != dtype:
        raise TypeError(f"{where}: array dtype is {value.dtype} but the kernel expects {dtype} "
                        f"elements; convert with a.astype({dtype})")
    if lanes > 1 and value.size % lanes:
        raise ValueError(f"{where}: {param.base} reads {lanes} elements at a time, but the array "
                         f"has {value.size} elements (not a multiple of {lanes})")
    align = _ALIGN.get(param.base, 1)
    if align > 1 and value.size and address(value) % align:
        raise ValueError(f"{where}: {param.base} needs {align}-byte aligned data; this array "
                         "(a slice?) is not aligned — pass a fresh array")
    if not param.const and backend == "cpu" and not value.flags.writeable:
        raise ValueError(f"{where}: the kernel may write through this pointer but the array is "
                         "read-only; pass a writeable copy (or declare the parameter const)")
    return value


def address(array) -> int:
    """Where an array's data starts: the device pointer of a CuPy array, else the host one."""
    device_pointer = getattr(getattr(array, "data", None), "ptr", None)   # cupy.ndarray
    return device_pointer if device_pointer is not None else array.__array_interface__["data"][0]


def check_aligned(alignment: int, **arrays) -> None:
    """Raise ValueError naming the first of ``arrays`` (name=array) whose data does not start on
    an ``alignment``-byte boundary - for kernels that move that many bytes at a time."""
    for name, array in arrays.items():
        if array.size and address(array) % alignment:
            raise ValueError(f"{name} must be {alignment}-byte aligned: this kernel loads or stores "
                             f"{alignment} bytes at a time. A fresh array is; a slice such as a[1:] "
                             "is not - pass a copy")


def _scalar(param: Param, value, where: str):
    dtype, lanes = param_dtype(param)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not isinstance(value, np.generic) and (hasattr(value, "__len__") or getattr(value, "ndim", 0) > 0):
        raise TypeError(f"{where}: expected a scalar, got {_describe(value)}" + _struct_hint(param, dtype, lanes))
    if dtype is None or lanes > 1:
        if isinstance(value, np.generic):   # a struct, dim3 or vector by value: a structured scalar
            return value
        raise TypeError(f"{where}: pmpp cannot convert a Python value to {param.base!r}; "
                        "pass a NumPy scalar of exactly that C type" + _struct_hint(param, dtype, lanes))
    if isinstance(value, np.generic):
        if value.dtype != dtype:
            raise TypeError(f"{where}: got a numpy.{value.dtype} scalar but the parameter is "
                            f"{param.base} (numpy.{dtype}); pass numpy.{dtype}(value) or a Python number")
        return value
    return _from_python(value, dtype, where)


def _struct_hint(param: Param, dtype, lanes: int) -> str:
    """How to pass a struct, ``dim3`` or vector type by value."""
    if dtype is not None and lanes == 1:
        return ""
    return (f". A {param.base} is passed as a NumPy structured scalar laid out as the C type, e.g. "
            "np.array((1, 2, 3), np.dtype([('x', np.uint32), ('y', np.uint32), ('z', np.uint32)]))[()] "
            "for a dim3 (build the dtype with align=True for C's padding)")


def _from_python(value, dtype: np.dtype, where: str):
    if dtype.kind == "b" or isinstance(value, bool):
        if not isinstance(value, (bool, int)):
            raise TypeError(f"{where}: expected a bool, got {_describe(value)}")
        return dtype.type(value)
    if isinstance(value, int):
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            if not info.min <= value <= info.max:
                raise ValueError(f"{where}: {value} does not fit in {dtype} [{info.min}, {info.max}]")
        return dtype.type(value)
    if isinstance(value, float):
        if dtype.kind in "iu":
            raise TypeError(f"{where}: got the float {value!r} for an integer parameter; "
                            "pass an int (e.g. int(value))")
        return dtype.type(value)
    raise TypeError(f"{where}: expected a number, got {_describe(value)}")


def _describe(value) -> str:
    t = type(value)
    extra = f" of dtype {value.dtype}" if hasattr(value, "dtype") else ""
    return f"{t.__module__}.{t.__name__}{extra}"


def _move_hint(value, backend: str) -> str:
    module = type(value).__module__.split(".")[0]
    if backend == "cupy" and module == "numpy":
        return "It lives in host memory: copy it to the GPU with cupy.asarray(a) (or pmpp.xp.asarray(a))."
    if backend == "cpu" and module == "cupy":
        return "It lives on the GPU, but this module runs on the CPU engine: use a.get() or load with backend='cupy'."
    return "Create it with pmpp.xp (the active backend's array module)."
