"""Compile one program with NVRTC in a process of its own: ``python nvrtc_compile.py REQUEST``,
REQUEST a JSON file {"library", "source", "filename", "options", "names"}. Prints NVRTC's log and
exits with its nvrtcResult. Standard library only, so that it starts fast; :mod:`.nvrtc` runs it
under the compile limits (time, memory, output), as it runs g++: kernel code that keeps the
front end busy forever (a constexpr loop) or fills the memory stops there."""
import ctypes
import json
import sys


def compile_program(lib, src, filename, options, names):
    """(nvrtcResult, log) of ``src`` compiled as ``filename``."""
    program = ctypes.c_void_p()
    status = lib.nvrtcCreateProgram(ctypes.byref(program), src.encode(), filename.encode(), 0, None, None)
    if status:
        return status, error_string(lib, status)
    try:
        for expression in names:
            lib.nvrtcAddNameExpression(program, expression.encode())
        argv = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
        status = lib.nvrtcCompileProgram(program, len(options), argv)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value + 1)
        lib.nvrtcGetProgramLog(program, log)
        return status, log.value.decode(errors="replace") or error_string(lib, status)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def error_string(lib, status):
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return (lib.nvrtcGetErrorString(status) or b"").decode()


def main(request_path):
    with open(request_path) as f:
        request = json.load(f)
    status, log = compile_program(ctypes.CDLL(request["library"]), request["source"], request["filename"],
                                  request["options"], request["names"])
    sys.stdout.write(log)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
