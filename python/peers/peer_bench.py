"""The peers `assay bench --peer` measures itself against.

Two ways an engineer checks a kernel in Python today, on the same small shapes as assay's small
class (every size <= --max-dim) and with the checks assay runs on every case:

- ``hypothesis``: a Hypothesis property test (``@given`` over shapes and seeds) with PyTorch;
- ``loop``: a plain PyTorch loop drawing the same shapes with ``random``.

Per case, both: inputs drawn on the GPU into tensors with padded rows and guard regions
around the output; the op under test (PyTorch's own fp32 kernel stands in for the user's
kernel); an fp64 reference on the same rounded inputs; a per-element bound from the usual
forward-error analysis (gamma_n * magnitude, one rounding of the output); the NaN/Inf pattern;
a second launch compared bit for bit (determinism); the inputs compared with their copies
(no input writes); the guards around the output compared with their fill (no
out-of-bounds writes). One synchronisation per case, where the verdict is read, as a test
written this way has.

Prints one JSON line: {"op", "mode", "cases", "seconds", "cases_per_second", "failures"}.
Exit 0 measured, 3 skipped (no torch, hypothesis or GPU; the line says why), 4 no peer for
the op.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time

EXIT_SKIP = 3
EXIT_NO_PEER = 4
GUARD = 64  # guard elements on each side of an output
U32 = 2.0**-24


def gamma(n: int) -> float:
    nu = n * U32
    return nu / (1 - nu)


class Peer:
    """Allocation, guard and check helpers shared by the ops."""

    def __init__(self, torch, device):
        self.torch = torch
        self.device = device

    def padded(self, rows: int, cols: int, gen):
        """A rows x cols fp32 view with padded rows (values drawn on the GPU)."""
        t = self.torch
        ld = cols + random.choice((0, 1, 3))
        base = t.randn(rows * ld + 1, device=self.device, generator=gen)
        return base[: rows * ld].view(rows, ld)[:, :cols]

    def output(self, shape):
        """An output view inside a NaN-filled buffer with guards on both sides."""
        t = self.torch
        n = math.prod(shape)
        buf = t.full((n + 2 * GUARD,), float("nan"), device=self.device)
        return buf, buf[GUARD : GUARD + n].view(shape)

    def launch_twice(self, shape, fn):
        """fn()'s result written into a guarded output, twice (the second for determinism)."""
        buf, out = self.output(shape)
        out.copy_(fn())
        _, rerun = self.output(shape)
        rerun.copy_(fn())
        return buf, out, rerun

    def check(self, out_buf, out, ref, tol, inputs, copies, rerun) -> bool:
        """Every check on one case, reduced on the GPU, one synchronisation."""
        t = self.torch
        n = out.numel()
        err = (out.double() - ref).abs()
        finite = t.isfinite(ref)
        bad = (t.isnan(out) != t.isnan(ref)) | (finite & ~(err <= tol))
        guards = t.cat((out_buf[:GUARD], out_buf[GUARD + n :]))
        flags = t.stack(
            (
                bad.any(),
                ~t.isnan(guards).all(),
                ((out != rerun) & ~(t.isnan(out) & t.isnan(rerun))).any(),
                t.stack([(a != b).any() for a, b in zip(inputs, copies)]).any(),
            )
        )
        return not bool(flags.any().item())


def case_gemm(p: Peer, gen, max_dim):
    t = p.torch
    m, n, k = (random.randint(1, max_dim) for _ in range(3))
    a, b = p.padded(m, k, gen), p.padded(k, n, gen)
    copies = [a.clone(), b.clone()]
    buf, c, c2 = p.launch_twice((m, n), lambda: t.matmul(a, b))
    ad, bd = a.double(), b.double()
    ref = ad @ bd
    mag = ad.abs() @ bd.abs()
    tol = gamma(k) * mag + U32 * ref.abs()
    return p.check(buf, c, ref, tol, [a, b], copies, c2)


def case_softmax(p: Peer, gen, max_dim):
    t = p.torch
    rows, n = random.randint(1, max_dim), random.randint(1, max_dim)
    x = p.padded(rows, n, gen)
    copies = [x.clone()]
    buf, y, y2 = p.launch_twice((rows, n), lambda: t.softmax(x, dim=-1))
    ref = t.softmax(x.double(), dim=-1)
    tol = gamma(2 * n + 8) * ref.abs() + 2 * U32 * ref
    return p.check(buf, y, ref, tol, [x], copies, y2)


def case_layernorm(p: Peer, gen, max_dim, rms=False):
    t = p.torch
    rows, n = random.randint(1, max_dim), random.randint(1, max_dim)
    x = p.padded(rows, n, gen)
    w = t.randn(n, device=p.device, generator=gen)
    copies = [x.clone(), w.clone()]
    xd, wd = x.double(), w.double()
    if rms:
        buf, y, y2 = p.launch_twice((rows, n), lambda: t.nn.functional.rms_norm(x, (n,), w, 1e-5))
        r = t.rsqrt((xd * xd).mean(-1, keepdim=True) + 1e-5)
        ref = xd * r * wd
        mag = xd.abs() * r * wd.abs()
    else:
        buf, y, y2 = p.launch_twice((rows, n), lambda: t.nn.functional.layer_norm(x, (n,), w, None, 1e-5))
        mu = xd.mean(-1, keepdim=True)
        r = t.rsqrt(((xd - mu) ** 2).mean(-1, keepdim=True) + 1e-5)
        ref = (xd - mu) * r * wd
        mag = (xd.abs() + mu.abs()) * r * wd.abs()
    tol = gamma(3 * n + 8) * mag + U32 * ref.abs()
    return p.check(buf, y, ref, tol, [x, w], copies, y2)


def case_attention(p: Peer, gen, max_dim):
    t = p.torch
    b, h = random.randint(1, 2), random.randint(1, 4)
    sq, sk, d = random.randint(1, max_dim), random.randint(1, max_dim), random.randint(1, max_dim)
    q = t.randn(b, h, sq, d, device=p.device, generator=gen)
    k = t.randn(b, h, sk, d, device=p.device, generator=gen)
    v = t.randn(b, h, sk, d, device=p.device, generator=gen)
    copies = [q.clone(), k.clone(), v.clone()]
    f = t.nn.functional.scaled_dot_product_attention
    buf, o, o2 = p.launch_twice((b, h, sq, d), lambda: f(q, k, v))
    qd, kd, vd = q.double(), k.double(), v.double()
    pr = t.softmax(qd @ kd.transpose(-1, -2) / math.sqrt(d), dim=-1)
    ref = pr @ vd
    mag = pr @ vd.abs()
    tol = gamma(2 * sk + d + 8) * (mag + (qd.abs() @ kd.abs().transpose(-1, -2)).amax(-1, keepdim=True) * mag)
    return p.check(buf, o, ref, tol, [q, k, v], copies, o2)


def case_conv2d(p: Peer, gen, max_dim):
    t = p.torch
    n, c, kk = random.randint(1, 4), random.randint(1, 16), random.randint(1, 16)
    hh, ww = random.randint(1, 40), random.randint(1, 40)
    r = random.randint(1, min(7, hh))
    s = random.randint(1, min(7, ww))
    x = t.randn(n, c, hh, ww, device=p.device, generator=gen)
    w = t.randn(kk, c, r, s, device=p.device, generator=gen)
    copies = [x.clone(), w.clone()]
    f = t.nn.functional.conv2d
    p_out = (n, kk, hh - r + 1, ww - s + 1)  # no padding, stride 1
    buf, y, y2 = p.launch_twice(p_out, lambda: f(x, w))
    ref = f(x.double(), w.double())
    mag = f(x.double().abs(), w.double().abs())
    tol = gamma(c * r * s) * mag + U32 * ref.abs()
    return p.check(buf, y, ref, tol, [x, w], copies, y2)


def case_activation(p: Peer, gen, max_dim):
    t = p.torch
    rows, n = random.randint(1, max_dim), random.randint(1, max_dim)
    x = p.padded(rows, n, gen) * 4
    copies = [x.clone()]
    g = t.nn.functional.gelu
    buf, y, y2 = p.launch_twice((rows, n), lambda: g(x))
    ref = g(x.double())
    tol = 8 * U32 * (ref.abs() + x.double().abs()) + 2.0**-126
    return p.check(buf, y, ref, tol, [x], copies, y2)


CASES = {
    "gemm": case_gemm,
    "softmax": case_softmax,
    "layernorm": case_layernorm,
    "rmsnorm": lambda p, g, m: case_layernorm(p, g, m, rms=True),
    "attention": case_attention,
    "conv2d": case_conv2d,
    "activation": case_activation,
}


def measure(op: str, mode: str, seconds: float, max_dim: int, seed: int):
    try:
        import torch
    except ImportError as e:
        return EXIT_SKIP, {"skipped": f"no torch ({e})"}
    if not torch.cuda.is_available():
        return EXIT_SKIP, {"skipped": "no CUDA GPU visible to torch"}
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    peer = Peer(torch, dev)
    fn = CASES[op]
    random.seed(seed)
    gen = torch.Generator(device=dev)
    counts = {"cases": 0, "failures": 0}

    def one(s: int):
        gen.manual_seed(s)
        ok = fn(peer, gen, max_dim)
        counts["cases"] += 1
        counts["failures"] += 0 if ok else 1

    for _ in range(20):  # warm-up: cuBLAS/cuDNN handles, kernel selection
        one(random.getrandbits(31))
    counts.update(cases=0, failures=0)
    t0 = time.perf_counter()
    if mode == "loop":
        while time.perf_counter() - t0 < seconds:
            one(random.getrandbits(31))
    else:
        try:
            from hypothesis import HealthCheck, given, settings
            from hypothesis import strategies as st
        except ImportError as e:
            return EXIT_SKIP, {"skipped": f"no hypothesis ({e})"}

        class Done(Exception):
            pass

        @settings(max_examples=10**9, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(st.integers(0, 2**31 - 1), st.randoms(use_true_random=False))
        def prop(s, rnd):
            # Hypothesis draws the case; the shape draws go through its Random.
            random.seed(rnd.getrandbits(64))
            one(s)
            if time.perf_counter() - t0 >= seconds:
                raise Done

        try:
            prop()
        except Done:
            pass
    secs = time.perf_counter() - t0
    return 0, {"cases": counts["cases"], "seconds": round(secs, 3),
               "cases_per_second": round(counts["cases"] / secs, 1), "failures": counts["failures"],
               "device": torch.cuda.get_device_name(0), "torch": torch.__version__}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", required=True)
    ap.add_argument("--mode", choices=("hypothesis", "loop"), default="hypothesis")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--max-dim", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    head = {"op": a.op, "mode": a.mode, "max_dim": a.max_dim}
    if a.op not in CASES:
        print(json.dumps({**head, "skipped": f"no peer for {a.op} (peers: {', '.join(sorted(CASES))})"}))
        return EXIT_NO_PEER
    rc, body = measure(a.op, a.mode, a.seconds, a.max_dim, a.seed)
    print(json.dumps({**head, **body}))
    return rc


if __name__ == "__main__":
    sys.exit(main())
