"""assay from Python: the op model, campaigns, shrinking, the corpus and replay of assay's C++
core (libassay_capi.so, loaded with ctypes), and a pytest plugin (assay.pytest_plugin).

    import assay
    report = assay.fuzz("softmax", my_launch, contract=assay.Contract(max={"n": 8192}), time=20)
    assert report.passed, report

python/README.md has the whole story.
"""
from __future__ import annotations

from ._lib import AssayError, available
from .host import HostCase, generate, host_evaluate, outside_contract, shrink, shrink_candidates, validate, write_entry
from .op import Contract, Op, bounds, choice, describe, dtype, extent, flag, integer, list_ops, real, tensor
from .run import (Failure, Report, Verdict, corpus_entries, device_count, fuzz, gpu_available, read_entry, replay,
                  run_case, variant)


def version() -> str:
    from . import _lib

    return _lib.lib().assay_version().decode()


def check(op, contract: Contract | None = None, *, time: float = 10.0, cases: int | None = None, seed: int = 1,
          corpus: str | None = None, name: str | None = None, expect_failure: bool = False, **fuzz_options):
    """Turns a launcher `launch(tensors, params)` into a pytest test (assay.pytest_plugin):
    one test item fuzzes it for `time` seconds (id "fuzz"), and each stored case of this variant
    in the corpus replays as its own item (id: the case id). expect_failure: a planted bug, the
    test passes when assay catches it (and stored cases must still fail)."""
    from .pytest_plugin import make_check

    return make_check(op, contract, time=time, cases=cases, seed=seed, corpus=corpus, name=name,
                      expect_failure=expect_failure, fuzz_options=fuzz_options)


__all__ = ["AssayError", "Contract", "Failure", "HostCase", "Op", "Report", "Verdict", "available", "bounds", "check",
           "choice", "corpus_entries", "describe", "device_count", "dtype", "extent", "flag", "fuzz", "generate",
           "gpu_available", "host_evaluate", "integer", "list_ops", "outside_contract", "read_entry", "real",
           "replay", "run_case", "shrink", "shrink_candidates", "tensor", "validate", "variant", "version",
           "write_entry"]
