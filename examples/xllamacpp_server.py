"""llama-server's command line on PyPI's prebuilt `xllamacpp`: a separate process that takes llama-server's argv.

xllamacpp (https://github.com/xorbitsai/xllamacpp) ships llama.cpp's own C++ server inside a Python
extension, with no executable and no argv parser in its Python API: its `Server(CommonParams)` starts
the HTTP server on a thread of the calling process. This script makes it a process that a profile's
`binary` can name, with llama-server's own flags: it hands argv to llama.cpp's `common_params_parse`
(exported by the extension, called through ctypes) with the example set to the server's, into the
`common_params` that a `CommonParams` object holds, then starts `Server` on it and waits.

So the flags are parsed by the same code as the real llama-server of that llama.cpp version: `--help`,
`--version` and `--list-devices` print and exit as llama-server does, a bad flag is refused with
llama-server's message and exit 1, and the `LLAMA_ARG_*`/`LLAMA_API_KEY` variables count. SIGTERM and
SIGINT stop it.

It depends on two things the package does not promise, and checks both before it parses anything:
the `common_params` struct sits right after the object header of a `CommonParams` (Cython's layout for
a class without cdef methods), and `LLAMA_EXAMPLE_SERVER` is 12 in llama.cpp's `enum llama_example`.
If either check fails it exits 2 and says which.

Run it with the Python of a virtualenv that has xllamacpp (kept apart from the project's own):

    python3 -m venv /var/tmp/xllama-venv && /var/tmp/xllama-venv/bin/pip install xllamacpp
    /var/tmp/xllama-venv/bin/python examples/xllamacpp_server.py -m model.gguf --port 8080 --metrics

A profile's `binary` must be one executable file, so point it at a two-line shell script:
`#!/bin/sh` and `exec /var/tmp/xllama-venv/bin/python /path/to/examples/xllamacpp_server.py "$@"`
(examples/compare_xllamacpp.py writes one). Measured in docs/benchmarks.md, "xllamacpp as the
embedded server".
"""

from __future__ import annotations

import ctypes
import signal
import sys
import threading

# common_params_parse(int argc, char ** argv, common_params & params, llama_example ex,
#                     void (*print_usage)(int, char **)) -> bool, as the extension exports it.
PARSE_SYMBOL = "_Z19common_params_parseiPPcR13common_params13llama_examplePFviS0_E"
LLAMA_EXAMPLE_SERVER = 12
SENTINEL = 0x1357_2468


def fail(message: str) -> None:
    print(f"xllamacpp_server: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def struct_address(params) -> int:
    """Where the C++ common_params of a CommonParams object starts, checked through a field we set."""
    header = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)  # ob_refcnt, ob_type
    saved = params.n_predict
    params.n_predict = SENTINEL  # common_params' first field (int32_t n_predict)
    found = ctypes.c_int32.from_address(id(params) + header).value
    params.n_predict = saved
    if found != SENTINEL:
        fail(
            "this xllamacpp's CommonParams does not hold common_params right after its object header; "
            "the launcher needs updating for this version"
        )
    return id(params) + header


def parser(xlc):
    try:
        lib = ctypes.CDLL(xlc.xllamacpp.__file__)
        parse = getattr(lib, PARSE_SYMBOL)
    except (OSError, AttributeError) as exc:
        fail(f"llama.cpp's common_params_parse is not exported by {xlc.xllamacpp.__file__}: {exc}")
    parse.restype = ctypes.c_bool
    parse.argtypes = [
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_void_p,
    ]

    def run(args: list[str], params) -> bool:
        argv = ["llama-server", *args]
        array = (ctypes.c_char_p * (len(argv) + 1))(*[a.encode() for a in argv], None)
        return parse(len(argv), array, struct_address(params), LLAMA_EXAMPLE_SERVER, None)

    # --metrics is a server-only flag: accepted (and set) only if 12 is still the server's example.
    probe = xlc.CommonParams()
    if not run(["--metrics"], probe) or not probe.endpoint_metrics:
        fail(f"LLAMA_EXAMPLE_SERVER is no longer {LLAMA_EXAMPLE_SERVER} in this xllamacpp's llama.cpp")
    return run


def main(args: list[str]) -> int:
    import xllamacpp as xlc

    parse = parser(xlc)
    params = xlc.CommonParams()
    if not parse(args, params):  # llama.cpp printed why, as llama-server does
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        server = xlc.Server(params)  # returns once the model is loaded; /health says 503 until then
    except Exception as exc:
        print(f"xllamacpp_server: the server did not start: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"xllamacpp_server: xllamacpp {xlc.__version__} serving at {server.listening_address}",
          file=sys.stderr, flush=True)  # fmt: skip
    while not stop.wait(3600):
        pass
    del server  # terminates the server loop and joins its thread
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
