"""Declaring ops and variants from Python: the op model of harness/op.h as JSON plus callbacks.

    op = assay.Op("matmul",
                  params=[assay.extent("m", 1, 512), assay.extent("n", 1, 512), assay.extent("k", 1, 512),
                          assay.dtype("dtype", ["fp32", "fp16"])],
                  tensors=[assay.tensor("A", ["m", "k"]), assay.tensor("B", ["k", "n"]),
                           assay.tensor("C", ["m", "n"], role="out")],
                  reference=lambda p, t: (t["A"] @ t["B"], np.abs(t["A"]) @ np.abs(t["B"])),
                  bound=assay.bounds.dot("k"))

The reference gets the op's params (a dict) and its input tensors as read-only numpy float64
arrays with the case's shapes and strides (the same rounded values the kernel reads), and
returns the output (one output), (output, magnitude) or a dict by output name. The bound is
one of assay.bounds (models of harness/bounds.h) or a callable.
"""
from __future__ import annotations

import ctypes
import json
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from . import _lib
from ._lib import AssayError

# ---- params and tensors ------------------------------------------------------------------------


def extent(name: str, lo: int, hi: int, aim: list[int] | None = None, cap: tuple[int, list[str]] | None = None,
           optional: int = 0, doc: str = "") -> dict:
    """A tensor dimension in [lo, hi] (capped by the campaign's max_dim), drawn edge-biased,
    aiming at `aim` and its neighbours; cap=(budget, [params]) bounds it by budget / product."""
    d: dict[str, Any] = {"name": name, "kind": "extent", "lo": lo, "hi": hi, "doc": doc}
    if aim:
        d["aim"] = list(aim)
    if cap:
        d["cap"] = {"budget": int(cap[0]), "over": list(cap[1])}
    if optional:
        d["optional"] = optional
    return d


def integer(name: str, lo: int, hi: int, aim: list[int] | None = None, optional: int = 0, doc: str = "") -> dict:
    d = extent(name, lo, hi, aim=aim, optional=optional, doc=doc)
    d["kind"] = "int"
    return d


def real(name: str, values: list[float], optional: int = 0) -> dict:
    return {"name": name, "kind": "real", "values": list(values), "optional": optional}


def flag(name: str, optional: int = 0) -> dict:
    return {"name": name, "kind": "flag", "optional": optional}


def choice(name: str, values: list[str], optional: int = 0) -> dict:
    return {"name": name, "kind": "choice", "values": list(values), "optional": optional}


def dtype(name: str, values: list[str]) -> dict:
    """A dtype param ("fp32", "fp16", "bf16", ...); tensors name it as their dtype."""
    return {"name": name, "kind": "dtype", "values": list(values)}


def tensor(name: str, dims: list[str | int], role: str = "in", dtype: str = "dtype",
           classes: list[str] | None = None, specials: list[str] | None = None, padded: bool = True) -> dict:
    """A tensor: dims are param names or integers, outermost first; dtype a dtype param or a
    dtype name; role in / out / inout; value classes (normal, uniform, same_sign, small_int, ...)
    and special values (nan, +inf, -inf, -0, all) for inputs."""
    d: dict[str, Any] = {"name": name, "role": role, "dims": list(dims), "dtype": dtype, "padded": padded}
    v: dict[str, Any] = {}
    if classes:
        v["classes"] = list(classes)
    if specials:
        v["specials"] = list(specials)
    if v:
        d["values"] = v
    return d


class bounds:  # noqa: N801 - a namespace
    """assay's bound models (harness/bounds.h), chosen by name."""

    @staticmethod
    def ulp(ulps: float = 1, compute: str = "fp32") -> dict:
        """Elementwise: `ulps` ulps of `compute` at |ref|, + half an ulp of a narrower output."""
        return {"model": "ulp", "ulps": ulps, "compute": compute}

    @staticmethod
    def dot(length: str, acc: str = "fp32") -> dict:
        """Dot products / GEMM of length `length` (a param) accumulated in `acc`, any order:
        gamma_{k+2}(u_acc) * mag + output rounding ([H] (3.5)); the reference returns mag = |A||B|."""
        return {"model": "dot", "length": length, "acc": acc}

    @staticmethod
    def sum(length: str, acc: str = "fp32") -> dict:
        """Row sums of `length` terms in `acc`: gamma_{n-1}(u_acc) * sum|x| ([H] (4.4)); mag = sum|x|."""
        return {"model": "sum", "length": length, "acc": acc}

    @staticmethod
    def exact() -> dict:
        """Bit-exact outputs."""
        return {"model": "exact"}


# ---- contracts -------------------------------------------------------------------------------------


@dataclass
class Contract:
    """What a kernel supports (harness/op.h Contract); a case outside is not applicable."""

    multiple_of: dict[str, int] = field(default_factory=dict)
    min: dict[str, int] = field(default_factory=dict)
    max: dict[str, int] = field(default_factory=dict)
    equal: list[tuple[str, str]] = field(default_factory=list)
    only: dict[str, list] = field(default_factory=dict)
    dtypes: list[str] | None = None
    dtype_param: str = "dtype"
    contiguous: bool = False
    aligned: int = 0
    switches_at: dict[str, list[int]] = field(default_factory=dict)
    accumulates: list[str] = field(default_factory=list)
    conventions: list[str] = field(default_factory=list)
    fast_math: bool = False
    ftz: bool = False
    tiles: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        j: dict[str, Any] = {}
        for k in ("multiple_of", "min", "max", "only", "switches_at", "tiles"):
            if getattr(self, k):
                j[k] = dict(getattr(self, k))
        for k in ("accumulates", "conventions"):
            if getattr(self, k):
                j[k] = list(getattr(self, k))
        if self.equal:
            j["equal"] = [list(e) for e in self.equal]
        if self.dtypes:
            j["dtypes"] = list(self.dtypes)
            j["dtype_param"] = self.dtype_param
        for k in ("contiguous", "fast_math", "ftz"):
            if getattr(self, k):
                j[k] = True
        if self.aligned:
            j["aligned"] = self.aligned
        return j


# ---- callbacks -----------------------------------------------------------------------------------------
# One trampoline per kind; `user` indexes a table, so an object can be re-bound (a re-imported
# test module) without registering again.

_table_lock = threading.Lock()
_table: list[Any] = []


def _slot(obj: Any) -> int:
    with _table_lock:
        _table.append(obj)
        return len(_table) - 1


def _report(e: BaseException) -> None:
    msg = "".join(traceback.format_exception_only(type(e), e)).strip()
    _lib.lib().assay_set_error(msg.encode(errors="replace"))


def _shape(t: _lib.Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    r = t.rank
    return tuple(t.shape[i] for i in range(r)), tuple(t.strides[i] for i in range(r))


def host_array(t: _lib.Tensor):
    """A read-only numpy float64 view of a host tensor handed out by the core."""
    import numpy as np

    shape, strides = _shape(t)
    if any(s == 0 for s in shape):
        return np.zeros(shape)
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    base = np.ctypeslib.as_array(ctypes.cast(t.data, ctypes.POINTER(ctypes.c_double)), shape=(span,))
    return np.lib.stride_tricks.as_strided(base, shape=shape, strides=tuple(8 * s for s in strides), writeable=False)


def _outputs(n: int, tensors) -> list[int]:
    return [i for i in range(n) if tensors[i].role != 0]


def _inputs(n: int, tensors) -> dict:
    return {tensors[i].name.decode(): host_array(tensors[i]) for i in range(n) if tensors[i].role != 1}


def _fill(dst_ptr, t: _lib.Tensor, value, what: str) -> None:
    import numpy as np

    shape, _ = _shape(t)
    size = int(np.prod(shape)) if shape else 1
    if size == 0:
        return
    dst = np.ctypeslib.as_array(dst_ptr, shape=(size,))
    v = np.asarray(value, dtype=np.float64)
    if v.shape != tuple(shape):
        try:
            v = np.broadcast_to(v, shape)
        except ValueError:
            raise AssayError(f"{what} of {t.name.decode()} has shape {v.shape}, the tensor {tuple(shape)}") from None
    dst[:] = v.reshape(-1)

def _split_result(result, names: list[str]) -> list[tuple[Any, Any]]:
    """The reference's return value as (output, magnitude or None) per output."""
    if isinstance(result, dict):
        missing = [n for n in names if n not in result]
        if missing:
            raise AssayError(f"the reference returned no {', '.join(missing)}")
        vals = [result[n] for n in names]
    elif len(names) == 1:
        vals = [result]
    else:
        vals = list(result)
        if len(vals) != len(names):
            raise AssayError(f"the reference returned {len(vals)} values for outputs {names}")
    out = []
    for v in vals:
        if isinstance(v, tuple) and len(v) == 2:
            out.append(v)
        else:
            out.append((v, None))
    return out


def _reference_tramp(user, params_json, n, tensors, ref, mag):
    try:
        op = _table[user or 0]
        params = json.loads(params_json)
        outs = _outputs(n, tensors)
        names = [tensors[i].name.decode() for i in outs]
        result = op.reference(params, _inputs(n, tensors))
        for o, (i, (val, m)) in enumerate(zip(outs, _split_result(result, names))):
            _fill(ref[o], tensors[i], val, "the reference")
            if m is not None:
                _fill(mag[o], tensors[i], m, "the magnitude")
            elif op.needs_mag:
                raise AssayError(f"bound model '{op.bound_model['model']}' needs a magnitude: return (output, mag) "
                                 f"for {names[o]} (sum |a||b| for a dot product, sum |x| for a sum)")
        return 0
    except BaseException as e:  # noqa: BLE001 - reported to the core, never raised through C
        _report(e)
        return 1


def _bound_tramp(user, params_json, arith_json, n, tensors, ref, mag, tol):
    try:
        import numpy as np

        op = _table[user or 0]
        params = json.loads(params_json)
        arith = json.loads(arith_json)
        outs = _outputs(n, tensors)
        refs, mags = {}, {}
        for o, i in enumerate(outs):
            shape, _ = _shape(tensors[i])
            size = int(np.prod(shape)) if shape else 1
            name = tensors[i].name.decode()
            refs[name] = np.ctypeslib.as_array(ref[o], shape=(max(size, 1),))[:size].reshape(shape).copy()
            mags[name] = np.ctypeslib.as_array(mag[o], shape=(max(size, 1),))[:size].reshape(shape).copy()
        result = op.bound_fn(params, _inputs(n, tensors), refs, mags, arith)
        names = list(refs)
        if not isinstance(result, dict):
            result = {names[0]: result} if len(names) == 1 else dict(zip(names, result))
        for o, i in enumerate(outs):
            _fill(tol[o], tensors[i], result[names[o]], "the bound")
        return 0
    except BaseException as e:  # noqa: BLE001
        _report(e)
        return 1


_REFERENCE = _lib.REFERENCE_FN(_reference_tramp)
_BOUND = _lib.BOUND_FN(_bound_tramp)

# ---- ops --------------------------------------------------------------------------------------------------

_ops: dict[str, "Op"] = {}


class Op:
    """An op registered with assay's core: its params, tensors, fp64 reference and bound."""

    def __init__(self, name: str, params: list[dict], tensors: list[dict], reference: Callable,
                 bound: dict | Callable, description: str = "", conventions: dict[str, str] | None = None):
        self.name = name
        self.reference = reference
        self.bound_model = bound if isinstance(bound, dict) else {"model": "callback"}
        self.bound_fn = None if isinstance(bound, dict) else bound
        self.needs_mag = self.bound_model.get("model") in ("dot", "sum")
        self.decl = {"name": name, "description": description, "params": params, "tensors": tensors,
                     "bound": self.bound_model, "conventions": conventions or {}}
        prev = _ops.get(name)
        if prev is not None:
            if prev.decl != self.decl:
                raise AssayError(f"op '{name}' is registered already with another declaration")
            _table[prev._slot] = self  # a re-imported module: re-bind the callbacks
            self._slot = prev._slot
        else:
            self._slot = _slot(self)
            _lib.check(_lib.lib().assay_register_op(json.dumps(self.decl).encode(), _REFERENCE, _BOUND, self._slot))
        _ops[name] = self

    def describe(self) -> dict:
        return describe(self.name)


def describe(op: str) -> dict:
    """An op's params, tensors and variants (with their contracts), as the core has them."""
    return _lib.take_json(_lib.lib().assay_describe_op(op.encode()))


def op_name(op: "str | Op") -> str:
    return op if isinstance(op, str) else op.name


def list_ops() -> list[str]:
    return _lib.take_json(_lib.lib().assay_list_ops())["ops"]
