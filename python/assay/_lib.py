"""ctypes binding of libassay_capi.so (harness/capi.h).

The library is found at $ASSAY_CAPI, beside this file, or in a build folder of the checkout
(build/python/libassay_capi.so). ctypes rather than a compiled extension: the .so has no
Python ABI in it, so one build serves Python 3.11 here and 3.12 on the GPU machine.
"""
from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path
from typing import Any

_NAME = "libassay_capi.so"


class AssayError(RuntimeError):
    """An error reported by assay's core (a bad declaration, an unknown op, no GPU...)."""


class Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_char_p),
        ("role", ctypes.c_int),
        ("rank", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("data", ctypes.c_void_p),
    ]


_DP = ctypes.POINTER(ctypes.c_double)
REFERENCE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                ctypes.POINTER(Tensor), ctypes.POINTER(_DP), ctypes.POINTER(_DP))
BOUND_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                            ctypes.POINTER(Tensor), ctypes.POINTER(_DP), ctypes.POINTER(_DP), ctypes.POINTER(_DP))
LAUNCH_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(Tensor),
                             ctypes.c_void_p, ctypes.c_int)
FORK_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                           ctypes.POINTER(ctypes.c_int))
JUDGE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)
ARRAY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, _DP)


def _candidates() -> list[Path]:
    here = Path(__file__).resolve().parent
    out = []
    if os.environ.get("ASSAY_CAPI"):
        out.append(Path(os.environ["ASSAY_CAPI"]))
    out.append(here / _NAME)
    for up in (here.parent.parent, Path.cwd()):
        out.append(up / "build" / "python" / _NAME)
    return out


def _load() -> ctypes.CDLL:
    tried = []
    for p in _candidates():
        if p.is_file():
            lib = ctypes.CDLL(str(p))
            _declare(lib)
            return lib
        tried.append(str(p))
    raise AssayError(f"{_NAME} not found (build it with `ninja -C build assay_capi`, or set ASSAY_CAPI); "
                     f"looked at: {', '.join(tried)}")


def _declare(lib: ctypes.CDLL) -> None:
    c = ctypes
    sigs = {
        "assay_version": (c.c_char_p, []),
        "assay_last_error": (c.c_char_p, []),
        "assay_set_error": (None, [c.c_char_p]),
        "assay_free": (None, [c.c_void_p]),
        "assay_register_op": (c.c_int, [c.c_char_p, REFERENCE_FN, BOUND_FN, c.c_void_p]),
        "assay_add_variant": (c.c_int, [c.c_char_p, c.c_char_p, LAUNCH_FN, c.c_void_p]),
        "assay_list_ops": (c.c_void_p, []),
        "assay_describe_op": (c.c_void_p, [c.c_char_p]),
        "assay_generate": (c.c_void_p, [c.c_char_p, c.c_char_p, c.c_uint64, c.c_int64, c.c_int64]),
        "assay_validate": (c.c_int, [c.c_char_p]),
        "assay_outside_contract": (c.c_void_p, [c.c_char_p, c.c_char_p]),
        "assay_shrink_candidates": (c.c_void_p, [c.c_char_p]),
        "assay_shrink": (c.c_void_p, [c.c_char_p, JUDGE_FN, c.c_void_p, c.c_int]),
        "assay_host_evaluate": (c.c_int, [c.c_char_p, c.c_char_p, ARRAY_FN, c.c_void_p]),
        "assay_write_entry": (c.c_void_p, [c.c_char_p, c.c_char_p, c.c_char_p]),
        "assay_read_entry": (c.c_void_p, [c.c_char_p]),
        "assay_list_entries": (c.c_void_p, [c.c_char_p]),
        "assay_device_count": (c.c_int, []),
        "assay_run_campaign": (c.c_void_p, [c.c_char_p, c.c_char_p, FORK_FN, c.c_void_p, PROGRESS_FN, c.c_void_p]),
        "assay_run_case": (c.c_void_p, [c.c_char_p, c.c_char_p, c.c_char_p, FORK_FN, c.c_void_p]),
        "assay_worker_serve": (c.c_int, [c.c_char_p, c.c_char_p, c.c_int, c.c_int, c.c_int]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args


_lib: ctypes.CDLL | None = None


def lib() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        _lib = _load()
    return _lib


def available() -> bool:
    try:
        lib()
        return True
    except (AssayError, OSError):
        return False


def enc(s: str | None) -> bytes | None:
    return None if s is None else s.encode()


def last_error() -> str:
    return (lib().assay_last_error() or b"").decode(errors="replace")


def check(rc: int) -> None:
    if rc != 0:
        raise AssayError(last_error() or f"assay error {rc}")


def take_json(ptr: int | None) -> Any:
    """Parses and frees a JSON string returned by the library; raises on NULL."""
    if not ptr:
        raise AssayError(last_error() or "assay call failed")
    try:
        return json.loads(ctypes.string_at(ptr).decode())
    finally:
        lib().assay_free(ptr)
