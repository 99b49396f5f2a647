"""Fuzzing, replay and shrinking from Python, on the core's campaign.

Crash isolation: the kernel runs in worker processes, as with the CLI, but they are forked
from this interpreter instead of exec'ing the assay binary (a Python launcher lives in this
process only). The core's process executor (harness/worker.h) asks for a worker through a
fork callback; the child serves the worker protocol with the op's registrations and
callbacks inherited, and a worker that dies (an illegal address poisons its CUDA context) is
replaced while the case it ran becomes a failure of kind crash. This process never
initialises CUDA (assay_device_count asks in a child), because a CUDA context does not
survive fork: do not touch the GPU (torch.cuda.*) in the test process before fuzzing, or
pass isolate=False to run lanes in this process.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import _cai, _lib
from ._lib import AssayError
from .op import Contract, Op, _slot, _table, op_name

# ---- variants ----------------------------------------------------------------------------------

CUDA_ERROR_UNKNOWN = 999  # what a launcher returns when the Python code raised


@dataclass
class _Variant:
    op: str
    name: str
    fn: Callable
    key: Callable | None
    decl: dict
    slot: int = -1


_variants: dict[tuple[str, str], _Variant] = {}
_launch_lock = threading.Lock()
_stats_path: str | None = None  # where a worker appends its compile records (set in the child)
_slow_call_s = 0.010  # a launch call this slow compiled (or loaded) a kernel: Triton launches take ~50 us


def _spec_key(params: dict, views: dict) -> tuple:
    """What Triton specialises on, approximately: constexpr-like sizes (their power-of-two
    bucket), divisibility by 16 and == 1 of every integer, dtypes and 16-byte alignment."""
    def k(v):
        if isinstance(v, bool) or not isinstance(v, int):
            return v if not isinstance(v, list) else tuple(v)
        return (v == 1, v % 16 == 0, max(v - 1, 0).bit_length())
    parts = [(n, k(v)) for n, v in sorted(params.items())]
    for n, t in views.items():
        parts.append((n, str(t.dtype), t.data_ptr() % 16 == 0, tuple(s % 16 == 0 for s in t.stride())))
    return tuple(parts)


def _record(kind: str, seconds: float, key: Any) -> None:
    if _stats_path is None:
        return
    line = json.dumps({"pid": os.getpid(), "kind": kind, "s": seconds, "key": repr(key)[:200]}) + "\n"
    with open(_stats_path, "a") as f:
        f.write(line)


_seen_keys: set = set()


def _launch_tramp(user, params_json, n, tensors, stream, device):
    try:
        import torch

        v: _Variant = _table[user or 0]
        params = json.loads(params_json)
        views = {}
        for i in range(n):
            t = tensors[i]
            shape = tuple(t.shape[j] for j in range(t.rank))
            strides = tuple(t.strides[j] for j in range(t.rank))
            views[t.name.decode()] = _cai.torch_view(t.data, t.dtype.decode(), shape, strides, device)
        with _launch_lock:  # one Python launch at a time per worker: Triton's JIT caches are not thread-safe
            key = (v.op, v.name, (v.key or _spec_key)(params, views))
            t0 = time.perf_counter()
            with torch.cuda.device(device), torch.cuda.stream(torch.cuda.ExternalStream(stream or 0, device=device)):
                v.fn(views, params)
            dt = time.perf_counter() - t0
            if key not in _seen_keys:
                _seen_keys.add(key)
                _record("specialisation", dt, key[2])
            elif dt > _slow_call_s:
                _record("slow_call", dt, key[2])
        return 0
    except BaseException:  # noqa: BLE001 - a launch error of this case, never raised through C
        traceback.print_exc(file=sys.stderr)
        return CUDA_ERROR_UNKNOWN


_LAUNCH = _lib.LAUNCH_FN(_launch_tramp)


def variant(op: "str | Op", launch: Callable, name: str | None = None, contract: Contract | None = None,
            deterministic: bool = True, source: str = "", description: str = "", mutant: bool = False,
            key: Callable | None = None) -> str:
    """Adds (once) a variant of `op` whose launcher is `launch(tensors, params)`; returns its name.
    Registering again with the same declaration re-binds the launcher."""
    opn = op_name(op)
    name = name or getattr(launch, "__name__", "python")
    if not source:
        code = getattr(launch, "__code__", None)
        source = os.path.relpath(code.co_filename) if code is not None else ""
    decl = {"name": name, "description": description or f"Python launcher {name}", "deterministic": deterministic,
            "mutant": mutant, "source": source, "contract": (contract or Contract()).to_json()}
    v = _variants.get((opn, name))
    if v is not None:
        if v.decl != decl:
            raise AssayError(f"variant '{name}' of {opn} is registered already with another declaration")
        v.fn, v.key = launch, key
        return name
    v = _Variant(opn, name, launch, key, decl)
    v.slot = _slot(v)
    _lib.check(_lib.lib().assay_add_variant(opn.encode(), json.dumps(decl).encode(), _LAUNCH, v.slot))
    _variants[(opn, name)] = v
    return name


# ---- workers ----------------------------------------------------------------------------------------


class _Forker:
    """The fork callback of one campaign or replay: the child serves the worker protocol."""

    def __init__(self, op: str, plan: dict, stats_path: str | None):
        self.op, self.plan, self.stats_path = op, plan, stats_path
        self.cb = _lib.FORK_FN(self._fork)

    def _fork(self, user, device, in_fd, out_fd, nclose, fds):
        close = [fds[i] for i in range(nclose)]
        try:
            with warnings.catch_warnings():  # numpy's BLAS threads make Python warn about fork
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError as e:
            _lib.lib().assay_set_error(f"fork: {e}".encode())
            return -1
        if pid != 0:
            return pid
        rc = 3
        try:  # the child: never returns into the parent's stack
            global _stats_path
            for fd in close:
                try:
                    os.close(fd)
                except OSError:
                    pass
            _stats_path = self.stats_path
            rc = _lib.lib().assay_worker_serve(self.op.encode(), json.dumps(self.plan).encode(), device, in_fd, out_fd)
        except BaseException:  # noqa: BLE001
            traceback.print_exc(file=sys.stderr)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)


def _cuda_initialised_here() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001
        return False


_gpu_cache: tuple[int, str] | None = None


def device_count() -> tuple[int, str]:
    """(number of CUDA devices, reason if none), asked in a child process."""
    global _gpu_cache
    if _gpu_cache is None:
        if not _lib.available():
            _gpu_cache = (0, "libassay_capi.so not found (build assay_capi or set ASSAY_CAPI)")
        else:
            n = _lib.lib().assay_device_count()
            _gpu_cache = (n, "") if n > 0 else (0, _lib.last_error() or "no CUDA device")
    return _gpu_cache


def gpu_available() -> bool:
    return device_count()[0] > 0


# ---- reports -------------------------------------------------------------------------------------------


@dataclass
class Failure:
    variant: str
    summary: str
    case: dict
    case_summary: str
    path: str
    kind: str
    seconds_to_find: float
    seconds_to_shrink: float

    @property
    def replay_cli(self) -> str:
        return f"assay replay {self.path}" if self.path else ""

    def replay_python(self, launch: str = "TEST_FILE.py:TEST_NAME") -> str:
        return f"python -m assay replay {self.path} --launch {launch}" if self.path else ""


@dataclass
class Report:
    op: str
    variant: str
    device: str
    cases: int
    seconds: float
    failures: list[Failure]
    compile_seconds: float = 0.0
    specialisations: int = 0
    workers: int = 1
    raw: dict = field(default_factory=dict)

    @property
    def cases_per_second(self) -> float:
        return self.cases / self.seconds if self.seconds > 0 else 0.0

    @property
    def steady_cases_per_second(self) -> float:
        """Cases per second with the compile time (spread over the workers) taken out."""
        t = self.seconds - self.compile_seconds / max(self.workers, 1)
        return self.cases / t if t > 0 else self.cases_per_second

    @property
    def passed(self) -> bool:
        return not self.failures

    def text(self) -> str:
        lines = [f"{self.op}[{self.variant}] on {self.device}: {self.cases} cases in {self.seconds:.1f} s "
                 f"({self.cases_per_second:.0f} cases/s; {self.steady_cases_per_second:.0f} cases/s without "
                 f"{self.compile_seconds:.1f} s of compiling {self.specialisations} specialisations over "
                 f"{self.workers} workers)"]
        for f in self.failures:
            lines += [f"FAIL {f.variant}: {f.summary}", f"  shrunk to: {f.case_summary}"]
            if f.path:
                lines += [f"  stored: {f.path}", f"  replay: {f.replay_cli}  (the CLI runs the op's built-in "
                          f"variants on it: add --variant NAME)", f"  replay: {f.replay_python()}"]
        return "\n".join(lines)

    __str__ = text


def _compile_stats(path: str | None) -> tuple[float, int]:
    if path is None or not os.path.exists(path):
        return 0.0, 0
    total, n = 0.0, 0
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r["kind"] == "specialisation" and r["s"] > _slow_call_s or r["kind"] == "slow_call":
                total += r["s"]
                n += 1
    return total, n


# ---- fuzzing -------------------------------------------------------------------------------------------


def fuzz(op: "str | Op", launch: Callable | None = None, *, contract: Contract | None = None,
         time: float | None = None, cases: int | None = None, seed: int = 1, corpus: str | None = "corpora",
         variant_name: str | None = None, deterministic: bool = True, lanes: int = 2, workers: int = 2,
         device: int = 0, max_dim: int = 2048, keep_going: bool = False, isolate: bool = True,
         case_timeout: float = 60.0, key: Callable | None = None, progress: Callable | None = None,
         max_shrink_seconds: float = 60.0) -> Report:
    """Fuzzes `launch` as a variant of `op` (or, launch=None, the op's own variants) for `time`
    seconds or `cases` cases; failures are shrunk and stored under `corpus`/<op>/<id>.json.

    Cases are drawn inside the contract. `workers` processes share the GPU (each compiles its
    own specialisations once; Triton's disk cache serves the rest), each with `lanes` lanes."""
    opn = op_name(op)
    variants = []
    if launch is not None:
        variants = [variant(opn, launch, name=variant_name, contract=contract, deterministic=deterministic,
                            key=key)]
    n, why = device_count()
    if n <= 0:
        raise AssayError(f"no GPU: {why}")
    if isolate and _cuda_initialised_here():
        raise AssayError("CUDA is initialised in this process, so forked workers cannot use it: fuzz before "
                         "touching the GPU here (torch.cuda.*), or pass isolate=False")
    if time is None and cases is None:
        cases = 1000
    stats = tempfile.NamedTemporaryFile(prefix="assay-compile-", suffix=".jsonl", delete=False)
    stats.close()
    target = variants[0] if len(variants) == 1 else ""
    options = {"variants": variants, "seed": seed, "lanes": lanes, "devices": [device] * max(workers, 1),
               "max_dim": max_dim, "target": target, "corpus": corpus or "", "keep_going": keep_going,
               "case_timeout": case_timeout, "max_shrink_seconds": max_shrink_seconds}
    if time is not None:
        options["seconds"] = float(time)
    if cases is not None:
        options["cases"] = int(cases)
    # The workers draw case i inside the contract of variants[i % V], as the campaign does.
    plan = {"seed": seed, "max_dim": max_dim, "target": target, "targets": variants, "lanes": lanes}
    forker = _Forker(opn, plan, stats.name) if isolate else None
    if not isolate:
        global _stats_path
        _stats_path = stats.name
        options["devices"] = [device]
    prog = _lib.PROGRESS_FN((lambda u, s: progress(json.loads(s))) if progress else (lambda u, s: None))
    try:
        raw = _lib.take_json(_lib.lib().assay_run_campaign(
            opn.encode(), json.dumps(options).encode(), forker.cb if forker else _lib.FORK_FN(0), None, prog, None))
        compile_s, specs = _compile_stats(stats.name)
    finally:
        os.unlink(stats.name)
    fails = []
    for f in raw["failures"]:
        kinds = [x.get("kind", "") for x in f.get("verdict", {}).get("failures", [])]
        fails.append(Failure(f["variant"], f["summary"], f["shrunk"], f["shrunk_summary"], f.get("path", ""),
                             kinds[0] if kinds else "", f["seconds_to_find"], f["seconds_to_shrink"]))
    return Report(opn, ",".join(variants) or "defaults", raw["device"], raw["cases"], raw["seconds"], fails,
                  compile_s, specs, len(options["devices"]), raw)


# ---- single cases: replay --------------------------------------------------------------------------------


@dataclass
class Verdict:
    variant: str
    passed: bool
    summary: str
    not_applicable: str
    raw: dict


def run_case(case: dict | str, launch: Callable | None = None, *, variant_name: str | None = None,
             contract: Contract | None = None, variants: list[str] | None = None, device: int = 0,
             isolate: bool = True) -> list[Verdict]:
    """Runs one case (a dict, a corpus entry path, or its JSON) through `launch` (registered as a
    variant of the case's op) or through `variants` (default: the case's own variant if the core
    knows it, else the op's built-in ones). Crashes come back as verdicts of kind crash."""
    if isinstance(case, (str, Path)) and os.path.exists(str(case)):
        case = read_entry(str(case))["case"]
    elif isinstance(case, str):
        case = json.loads(case)
    c = dict(case)
    if launch is not None:
        name = variant(c["op"], launch, name=variant_name, contract=contract)
        variants = [name]
    n, why = device_count()
    if n <= 0:
        raise AssayError(f"no GPU: {why}")
    forker = _Forker(c["op"], {"lanes": 1}, None) if isolate else None
    raw = _lib.take_json(_lib.lib().assay_run_case(json.dumps(c).encode(), json.dumps(variants or []).encode(),
                                                   json.dumps({"device": device}).encode(),
                                                   forker.cb if forker else _lib.FORK_FN(0), None))
    return [Verdict(v.get("variant", ""), v["passed"], v["summary"], v.get("not_applicable", ""), v)
            for v in raw["verdicts"]]


replay = run_case


def read_entry(path: str) -> dict:
    """A corpus entry: {"case", "id", "summary", "found", "replay", "path"}."""
    return _lib.take_json(_lib.lib().assay_read_entry(str(path).encode()))


def corpus_entries(root: str, op: str | None = None, variant_name: str | None = None) -> list[dict]:
    """Stored entries under `root` (of `op`, and of `variant_name` if given), sorted by path."""
    root_p = Path(root) / op if op else Path(root)
    if not root_p.is_dir():
        return []
    paths = _lib.take_json(_lib.lib().assay_list_entries(json.dumps([str(root_p)]).encode()))
    out = []
    for p in paths:
        try:
            e = read_entry(p)
        except AssayError:
            continue
        if variant_name is None or e["case"].get("variant", "") == variant_name:
            out.append(e)
    return out
