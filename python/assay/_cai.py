"""Zero-copy torch views of the core's device tensors through __cuda_array_interface__.

The interface has no bfloat16 or fp8 type strings, so those travel as same-width integers
and are re-viewed in torch (Tensor.view(dtype) reinterprets the bits, no copy).
"""
from __future__ import annotations

from typing import Any

# assay dtype name -> (typestr, torch dtype name to view as, or None)
_TYPES = {
    "fp64": ("<f8", None),
    "fp32": ("<f4", None),
    "tf32": ("<f4", None),
    "fp16": ("<f2", None),
    "bf16": ("<i2", "bfloat16"),
    "e4m3": ("|u1", "float8_e4m3fn"),
    "e5m2": ("|u1", "float8_e5m2"),
    "int32": ("<i4", None),
    "int8": ("|i1", None),
}
_SIZES = {"<f8": 8, "<f4": 4, "<f2": 2, "<i2": 2, "|u1": 1, "<i8": 8, "<i4": 4, "|i1": 1}


class DeviceArray:
    """A device buffer described by __cuda_array_interface__ (version 2: no stream field; the
    caller runs on the core's stream, so no synchronisation is implied)."""

    def __init__(self, ptr: int, typestr: str, shape: tuple[int, ...], strides_elems: tuple[int, ...]):
        size = _SIZES[typestr]
        self.__cuda_array_interface__ = {
            "version": 2,
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (int(ptr or 0), False),
            "strides": tuple(size * s for s in strides_elems),
        }


def describe(dtype: str) -> tuple[str, str | None]:
    if dtype not in _TYPES:
        raise TypeError(f"assay dtype {dtype} has no __cuda_array_interface__ type")
    return _TYPES[dtype]


def torch_view(ptr: int, dtype: str, shape: tuple[int, ...], strides: tuple[int, ...], device: int) -> Any:
    """A torch.Tensor over the device memory (no copy), with the case's shape and strides."""
    import torch

    typestr, view_as = describe(dtype)
    if any(s == 0 for s in shape):  # torch refuses a null pointer; an empty tensor is the same
        t = torch.empty(shape, dtype=getattr(torch, view_as) if view_as else _torch_dtype(typestr),
                        device=f"cuda:{device}")
        return t
    t = torch.as_tensor(DeviceArray(ptr, typestr, shape, strides), device=f"cuda:{device}")
    return t.view(getattr(torch, view_as)) if view_as else t


def _torch_dtype(typestr: str):
    import torch

    return {"<f8": torch.float64, "<f4": torch.float32, "<f2": torch.float16, "<i2": torch.int16,
            "|u1": torch.uint8, "<i8": torch.int64, "<i4": torch.int32, "|i1": torch.int8}[typestr]
