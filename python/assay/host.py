"""The host side of the core, usable without a GPU: case generation inside a contract,
validation, shrinking with a Python judge, the reference and bound of a case, the corpus."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from . import _lib
from ._lib import AssayError
from .op import Op, op_name


def generate(op: "str | Op", index: int, *, variant: str = "", seed: int = 1, max_dim: int = 2048) -> dict:
    """The case a campaign with this seed draws at `index` (inside `variant`'s contract)."""
    return _lib.take_json(_lib.lib().assay_generate(op_name(op).encode(), variant.encode(), seed, index, max_dim))


def validate(case: dict) -> None:
    """Raises AssayError naming the field if the case is not well-formed for its op."""
    _lib.check(_lib.lib().assay_validate(json.dumps(case).encode()))


def outside_contract(case: dict, variant: str) -> str | None:
    """The rule of `variant`'s contract the case breaks, or None."""
    return _lib.take_json(_lib.lib().assay_outside_contract(json.dumps(case).encode(), variant.encode()))["outside"]


def shrink_candidates(case: dict) -> list[dict]:
    return _lib.take_json(_lib.lib().assay_shrink_candidates(json.dumps(case).encode()))


@dataclass
class Shrunk:
    case: dict
    summary: str
    steps: int
    evals: int


def shrink(case: dict, fails: Callable[[dict], bool], max_evals: int = 4000) -> Shrunk:
    """Greedy shrinking with the core's candidates: keeps the first simpler case that still
    `fails` until none does (what a campaign does with GPU verdicts)."""
    err: list[BaseException] = []

    def judge(user, batch_json):
        try:
            for i, c in enumerate(json.loads(batch_json)):
                if fails(c):
                    return i
            return -1
        except BaseException as e:  # noqa: BLE001
            err.append(e)
            return -2

    cb = _lib.JUDGE_FN(judge)
    r = _lib.take_json(_lib.lib().assay_shrink(json.dumps(case).encode(), cb, None, max_evals))
    if err:
        raise err[0]
    return Shrunk(r["minimal"], r["summary"], r["steps"], r["evals"])


@dataclass
class HostCase:
    """A case evaluated on the host: inputs as the kernel reads them, and per output the fp64
    reference and the per-element tolerance (the check is |out - ref| <= tol, NaN/Inf patterns
    equal, bitwise where exact)."""
    case: dict
    inputs: dict
    ref: dict
    tol: dict
    exact: dict

    def check(self, outputs: dict) -> list[str]:
        """What a kernel's outputs (name -> array) break, one line each; empty: they pass."""
        import numpy as np

        problems = []
        for name, ref in self.ref.items():
            out = np.asarray(outputs[name], dtype=np.float64).reshape(ref.shape)
            tol = self.tol[name]
            checked = np.isfinite(tol)  # +Inf: no bound there (an overflow the op allows)
            out, ref, tol = out[checked], ref[checked], tol[checked]
            fin = np.isfinite(ref)
            if not np.array_equal(np.isnan(out), np.isnan(ref)) or not np.array_equal(
                    np.where(np.isinf(ref), ref, 0), np.where(np.isinf(out), out, 0)):
                problems.append(f"{name}: NaN/Inf pattern differs")
            err = np.where(fin & np.isfinite(out), np.abs(out - np.where(fin, ref, 0)), 0.0)
            bad = np.argwhere(err > tol)
            if self.exact[name] and not np.array_equal(out[fin], ref[fin]):
                problems.append(f"{name}: exact-tier case not bit-identical")
            if bad.size:
                i = int(bad[0][0])
                problems.append(f"{name}: {len(bad)} elements beyond the bound, first (of the bounded ones) {i}: "
                                f"{out[i]!r} vs reference {ref[i]!r} (tolerance {tol[i]:.3g})")
        return problems


def host_evaluate(case: dict, variant: str = "") -> HostCase:
    """Materialises the case's inputs on the host and runs the op's reference and bound (under
    `variant`'s declared arithmetic); no GPU involved."""
    import numpy as np

    got: dict[tuple[str, int], np.ndarray] = {}

    def sink(user, what, index, n, data):
        got[(what.decode(), index)] = np.ctypeslib.as_array(data, shape=(max(n, 1),))[:n].copy()

    cb = _lib.ARRAY_FN(sink)
    _lib.check(_lib.lib().assay_host_evaluate(json.dumps(case).encode(), variant.encode(), cb, None))
    tensors = case["tensors"]
    shapes = {t["name"]: tuple(t["shape"]) for t in tensors}
    inputs = {t["name"]: got[("input", i)].reshape(shapes[t["name"]]) for i, t in enumerate(tensors)
              if t["role"] != "out"}
    outs = [t["name"] for t in tensors if t["role"] != "in"]
    ref = {n: got[("ref", o)].reshape(shapes[n]) for o, n in enumerate(outs)}
    tol = {n: got[("tol", o)].reshape(shapes[n]) for o, n in enumerate(outs)}
    exact = {n: bool(got[("exact", o)][0]) for o, n in enumerate(outs)}
    return HostCase(case, inputs, ref, tol, exact)


def write_entry(root: str, case: dict, found: dict | None = None) -> str:
    """Stores a case as <root>/<op>/<id>.json (atomic; an existing entry of the same id stays)."""
    return _lib.take_json(_lib.lib().assay_write_entry(root.encode(), json.dumps(case).encode(),
                                                       json.dumps(found or {}).encode()))["path"]


__all__ = ["AssayError", "generate", "validate", "outside_contract", "shrink_candidates", "shrink", "host_evaluate",
           "HostCase", "write_entry"]
