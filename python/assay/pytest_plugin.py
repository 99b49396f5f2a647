"""pytest plugin of assay (entry point pytest11 "assay.pytest_plugin").

- @assay.check(op=..., contract=..., time=...) on a launcher makes a test: item "fuzz" runs a
  campaign within the time budget; each stored case of the variant in the corpus is an item of
  its own, its id the case id (stable: a content hash).
- Without a GPU those items are skipped, with the reason.
- Under pytest-xdist, worker gwN gets GPU N mod (number of GPUs) through CUDA_VISIBLE_DEVICES,
  set before anything initialises CUDA.
- Campaign figures go into the JUnit XML as properties (cases, cases_per_second,
  compile_seconds, ...) through pytest's own --junitxml.

Options: --assay-time S (every check's budget), --assay-corpus DIR, --assay-seed N.
"""
from __future__ import annotations

import os

import pytest

from . import run as _run
from ._lib import AssayError, available
from .op import Contract, op_name

MARK = "assay_gpu"


def pytest_addoption(parser):
    g = parser.getgroup("assay")
    g.addoption("--assay-time", type=float, default=None, help="fuzzing budget of every @assay.check, seconds")
    g.addoption("--assay-corpus", default=None, help="corpus folder for @assay.check (default: each check's own)")
    g.addoption("--assay-seed", type=int, default=None, help="campaign seed of every @assay.check")


def _xdist_device() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not visible:
        n, _ = _run.device_count()
        visible = [str(i) for i in range(n)]
    if len(visible) <= 1:
        return
    os.environ["CUDA_VISIBLE_DEVICES"] = visible[int(worker[2:] or 0) % len(visible)]
    _run._gpu_cache = None  # ask again under the new mask


def pytest_configure(config):
    config.addinivalue_line("markers", f"{MARK}: needs a GPU (assay skips it with the reason where none is present)")
    _xdist_device()


def pytest_report_header(config):
    if not available():
        return "assay: libassay_capi.so not found (GPU tests skip)"
    n, why = _run.device_count()
    return f"assay: {n} GPU(s)" + (f" ({why})" if why else "") + \
        (f", CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']}" if "CUDA_VISIBLE_DEVICES" in os.environ else "")


def pytest_collection_modifyitems(config, items):
    gpu = [i for i in items if i.get_closest_marker(MARK)]
    if not gpu:
        return
    n, why = _run.device_count()
    if n > 0:
        return
    skip = pytest.mark.skip(reason=f"assay: no GPU: {why}")
    for i in gpu:
        i.add_marker(skip)


class _CheckSpec:
    def __init__(self, op, contract, launch, name, time, cases, seed, corpus, expect_failure, fuzz_options):
        self.op, self.contract, self.launch, self.name = op, contract, launch, name
        self.time, self.cases, self.seed, self.corpus = time, cases, seed, corpus
        self.expect_failure, self.fuzz_options = expect_failure, fuzz_options

    def corpus_dir(self, config) -> str:
        return config.getoption("assay_corpus") or self.corpus or os.environ.get("ASSAY_CORPUS") or "corpora"


def pytest_generate_tests(metafunc):
    spec = getattr(metafunc.function, "_assay_check", None)
    if spec is None:
        return
    ids, params = ["fuzz"], ["fuzz"]
    if available():
        for e in _run.corpus_entries(spec.corpus_dir(metafunc.config), op_name(spec.op), spec.name):
            ids.append(e["id"])
            params.append(e["path"])
    metafunc.parametrize("assay_case", params, ids=ids)


def make_check(op, contract: Contract | None, *, time, cases, seed, corpus, name, expect_failure, fuzz_options):
    def deco(launch):
        vname = name or launch.__name__

        def test(assay_case, request):
            n, why = _run.device_count()
            if n <= 0:
                pytest.skip(f"assay: no GPU: {why}")
            spec: _CheckSpec = test._assay_check
            config = request.config
            if assay_case == "fuzz":
                report = _run.fuzz(op, launch, contract=contract, variant_name=vname,
                                   time=config.getoption("assay_time") or time, cases=cases,
                                   seed=config.getoption("assay_seed") or seed, corpus=spec.corpus_dir(config),
                                   **fuzz_options)
                for k, v in (("cases", report.cases), ("seconds", round(report.seconds, 3)),
                             ("cases_per_second", round(report.cases_per_second, 1)),
                             ("steady_cases_per_second", round(report.steady_cases_per_second, 1)),
                             ("compile_seconds", round(report.compile_seconds, 3)),
                             ("specialisations", report.specialisations), ("failures", len(report.failures))):
                    request.node.user_properties.append((k, v))
                for f in report.failures:
                    request.node.user_properties.append(("corpus_entry", f.path))
                print(report.text())
                if expect_failure:
                    assert report.failures, f"assay did not catch the planted bug in {vname}:\n{report.text()}"
                else:
                    assert not report.failures, report.text()
                return
            verdicts = _run.run_case(assay_case, launch, variant_name=vname, contract=contract)
            text = "\n".join(f"[{v.variant}] {'pass' if v.passed else v.summary}" for v in verdicts)
            print(f"{assay_case}\n{text}")
            failing = [v for v in verdicts if not v.passed and not v.not_applicable]
            if expect_failure:
                assert failing, f"stored failure {assay_case} of the planted bug passes now"
            else:
                assert not failing, f"{assay_case}: {text}\nreplay: python -m assay replay {assay_case} --launch ..."

        # pytest collects by the module attribute's name: call the launcher test_<something>.
        test.__name__ = launch.__name__
        test.__qualname__ = test.__name__
        test.__doc__ = launch.__doc__
        test.__module__ = launch.__module__
        test._assay_check = _CheckSpec(op, contract, launch, vname, time, cases, seed, corpus, expect_failure,
                                       fuzz_options)
        test.assay_launch = launch
        return pytest.mark.assay_gpu(test)

    return deco


__all__ = ["AssayError", "make_check"]
