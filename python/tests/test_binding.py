"""The ctypes binding over libassay_capi.so: declarations, generation, validation, contracts,
host evaluation with fake launchers, shrinking and the corpus."""

import numpy as np
import pytest

import assay
from assay import AssayError


def scale_ref(p, t):
    return 2.0 * t["X"] + t["B"][None, :]


SCALE = assay.Op(
    "cpu_scale",
    description="Y = 2 X + B (a row bias), for the binding tests",
    params=[assay.extent("rows", 1, 64), assay.extent("n", 1, 300, aim=[8, 32]), assay.dtype("dtype", ["fp32", "fp16"])],
    tensors=[assay.tensor("X", ["rows", "n"], classes=["normal", "uniform"]), assay.tensor("B", ["n"]),
             assay.tensor("Y", ["rows", "n"], role="out")],
    reference=scale_ref,
    bound=assay.bounds.ulp(1),
)


def dot_ref(p, t):
    return t["A"] @ t["W"], np.abs(t["A"]) @ np.abs(t["W"])


DOT = assay.Op(
    "cpu_dot",
    params=[assay.extent("m", 1, 16), assay.extent("k", 1, 200), assay.dtype("dtype", ["fp32"])],
    tensors=[assay.tensor("A", ["m", "k"], classes=["normal", "same_sign"]),
             assay.tensor("W", ["k", 1], classes=["normal", "uniform"]),
             assay.tensor("Y", ["m", 1], role="out")],
    reference=dot_ref,
    bound=assay.bounds.dot("k"),
)


def fake_scale(h, drop_last=False):
    """A 'kernel' in numpy, rounding like an fp32 kernel storing into the case's dtype."""
    x = h.inputs["X"].astype(np.float32)
    y = (np.float32(2) * x + h.inputs["B"].astype(np.float32)[None, :])
    if drop_last:
        y[:, -1] = 0
    dt = np.float16 if h.case["params"]["dtype"] == "fp16" else np.float32
    with np.errstate(over="ignore"):  # near-overflow biases: Inf where the bound allows it
        return {"Y": y.astype(dt).astype(np.float64)}


def test_library_loads_and_knows_the_builtin_ops():
    assert assay.version()
    ops = assay.list_ops()
    assert "softmax" in ops and "gemm" in ops and "cpu_scale" in ops
    d = assay.describe("softmax")
    assert [t["name"] for t in d["tensors"]] == ["X", "Y"]
    assert any(v["name"] == "online" for v in d["variants"])


def test_reregistering_rebinds_and_a_different_declaration_is_refused():
    again = assay.Op("cpu_scale", description="Y = 2 X + B (a row bias), for the binding tests",
                     params=SCALE.decl["params"], tensors=SCALE.decl["tensors"], reference=scale_ref,
                     bound=assay.bounds.ulp(1))
    assert again._slot == SCALE._slot
    with pytest.raises(AssayError, match="another declaration"):
        assay.Op("cpu_scale", params=SCALE.decl["params"], tensors=SCALE.decl["tensors"], reference=scale_ref,
                 bound=assay.bounds.ulp(2))


def test_bad_declarations_name_the_problem():
    with pytest.raises(AssayError, match="no integer param"):
        assay.Op("cpu_bad", params=[assay.extent("n", 1, 4)], tensors=[assay.tensor("X", ["rows"], dtype="fp32"),
                 assay.tensor("Y", ["n"], role="out", dtype="fp32")], reference=scale_ref, bound=assay.bounds.ulp())
    with pytest.raises(AssayError, match="length"):
        assay.Op("cpu_bad2", params=[assay.extent("n", 1, 4)], tensors=[assay.tensor("Y", ["n"], role="out",
                 dtype="fp32")], reference=scale_ref, bound={"model": "dot"})


def test_generation_is_deterministic_valid_and_inside_the_contract():
    def noop(t, p):
        raise AssertionError("never launched on the CPU")

    name = assay.variant("cpu_scale", noop, name="by8", contract=assay.Contract(multiple_of={"n": 8},
                                                                                dtypes=["fp32"]))
    seen_n = set()
    for i in range(60):
        c = assay.generate("cpu_scale", i, variant=name, seed=5)
        assert c == assay.generate("cpu_scale", i, variant=name, seed=5)
        assay.validate(c)
        assert c["params"]["n"] % 8 == 0 and c["params"]["dtype"] == "fp32"
        assert assay.outside_contract(c, name) is None
        seen_n.add(c["params"]["n"])
    assert len(seen_n) > 5
    # A case that is not well-formed is refused, the field named.
    bad = assay.generate("cpu_scale", 7, variant=name, seed=5)
    bad["params"]["n"] = "seven"
    with pytest.raises(AssayError, match="n"):
        assay.validate(bad)


def test_outside_contract_names_the_rule():
    def noop(t, p):
        pass

    name = assay.variant("cpu_scale", noop, name="by8", contract=assay.Contract(multiple_of={"n": 8},
                                                                                dtypes=["fp32"]))
    c = assay.generate("cpu_scale", 3, seed=11)  # the op's whole domain
    outside = [assay.outside_contract(assay.generate("cpu_scale", i, seed=11), name) for i in range(40)]
    assert any(o and "n % 8" in o for o in outside), outside
    assert c["op"] == "cpu_scale"


def test_host_evaluation_feeds_the_reference_and_judges_fake_launchers():
    for i in range(25):
        c = assay.generate("cpu_scale", i, seed=2)
        h = assay.host_evaluate(c)
        x, b = h.inputs["X"], h.inputs["B"]
        assert x.shape == tuple(c["tensors"][0]["shape"]) and b.shape == (c["params"]["n"],)
        np.testing.assert_array_equal(h.ref["Y"], 2 * x + b[None, :])
        assert (h.tol["Y"] > 0).all()
        assert h.check(fake_scale(h)) == [], c
        problems = h.check(fake_scale(h, drop_last=True))
        assert any("beyond the bound" in p for p in problems) or np.all(h.ref["Y"][:, -1] == 0)


def test_dot_bound_takes_the_magnitude_from_the_reference():
    for i in range(15):
        c = assay.generate("cpu_dot", i, seed=4)
        h = assay.host_evaluate(c)
        a32, w32 = h.inputs["A"].astype(np.float32), h.inputs["W"].astype(np.float32)
        y = np.zeros((a32.shape[0], 1), np.float32)
        for kk in range(a32.shape[1]):  # a sequential fp32 loop: inside gamma_{k+2} |A||W|
            y[:, 0] = y[:, 0] + a32[:, kk] * w32[kk, 0]
        assert h.check({"Y": y}) == []
        k = c["params"]["k"]
        if k > 1 and np.abs(a32[:, -1] * w32[-1, 0]).max() > 1e-3:
            dropped = (a32[:, :-1] @ w32[:-1, :]).astype(np.float64)  # a kernel that skips the last term
            assert h.check({"Y": dropped}), c


def test_builtin_softmax_reference_through_the_abi():
    for i in range(10):
        c = assay.generate("softmax", i, seed=9, max_dim=64)
        h = assay.host_evaluate(c, "online")
        x = h.inputs["X"]
        with np.errstate(invalid="ignore", over="ignore"):
            z = x - x.max(axis=1, keepdims=True)
            e = np.exp(z)
            s = e.sum(axis=1, keepdims=True)
            y = z - np.log(s) if c["params"].get("log") else e / s
        fin = np.isfinite(h.ref["Y"])
        np.testing.assert_allclose(y[fin], h.ref["Y"][fin], rtol=1e-12, atol=1e-300)


def test_a_reference_error_is_reported_not_raised_through_c():
    def broken(p, t):
        raise ValueError("reference exploded")

    assay.Op("cpu_broken", params=[assay.extent("n", 1, 8)],
             tensors=[assay.tensor("X", ["n"], dtype="fp32"), assay.tensor("Y", ["n"], role="out", dtype="fp32")],
             reference=broken, bound=assay.bounds.ulp())
    with pytest.raises(AssayError, match="reference exploded"):
        assay.host_evaluate(assay.generate("cpu_broken", 0))


def test_shrinking_with_a_fake_launcher_reaches_the_smallest_failing_case():
    c = next(c for c in (assay.generate("cpu_scale", i, seed=8) for i in range(50))
             if c["params"]["n"] > 20 and c["params"]["rows"] > 3)

    def fails(case):
        h = assay.host_evaluate(case)
        return bool(h.check(fake_scale(h, drop_last=True)))

    assert fails(c)
    s = assay.shrink(c, fails)
    assert s.steps > 0 and fails(s.case)
    assert s.case["params"]["rows"] == 1 and s.case["params"]["n"] == 1, s.summary


def test_corpus_roundtrip_ids_and_filters(tmp_path):
    c = assay.generate("cpu_scale", 4, seed=1)
    c["variant"] = "by8"
    path = assay.write_entry(str(tmp_path), c, {"verdict": {"passed": False}})
    assert path.endswith(".json") and "/cpu_scale/" in path
    e = assay.read_entry(path)
    assert e["case"] == c and path.endswith(e["id"] + ".json")
    assert assay.write_entry(str(tmp_path), c) == path  # content-addressed: the same case, the same entry
    assert [x["id"] for x in assay.corpus_entries(str(tmp_path), "cpu_scale", "by8")] == [e["id"]]
    assert assay.corpus_entries(str(tmp_path), "cpu_scale", "other") == []


def test_gpu_entry_points_fail_cleanly_without_a_gpu():
    n, why = assay.device_count()
    if n > 0:
        pytest.skip("a GPU is present")
    assert why
    with pytest.raises(AssayError, match="no GPU"):
        assay.fuzz("cpu_scale", lambda t, p: None, cases=1)
    with pytest.raises(AssayError, match="no GPU"):
        assay.run_case(assay.generate("cpu_scale", 0), lambda t, p: None, variant_name="noop")


def test_forked_worker_serves_the_protocol_and_reports_why_it_cannot_start():
    """The crash-isolation path without a GPU: the core's process executor asks the package for
    a worker, the interpreter forks, the child serves the worker protocol and reports that no
    lane can start; the campaign comes back as an error naming it, and this process survives."""
    if assay.gpu_available():
        pytest.skip("a GPU is present: the worker would start")
    import json as _json
    from assay import _lib, run

    forker = run._Forker("cpu_scale", {"seed": 1, "lanes": 1}, None)
    opts = {"cases": 3, "devices": [0, 0], "corpus": ""}
    ptr = _lib.lib().assay_run_campaign(b"cpu_scale", _json.dumps(opts).encode(), forker.cb, None,
                                        _lib.PROGRESS_FN(0), None)
    with pytest.raises(AssayError, match="worker for device 0"):
        _lib.take_json(ptr)


def test_cli_reads_an_entry_written_from_python(tmp_path):
    """A case of a built-in op stored from Python is read and validated by the CLI, and runs on
    the op's own kernels with --variant (the Python launcher is not in the CLI)."""
    import os
    import subprocess
    from pathlib import Path

    cli = os.environ.get("ASSAY_BINARY") or str(Path(__file__).resolve().parents[2] / "build" / "assay")
    if not os.access(cli, os.X_OK):
        pytest.skip(f"no assay CLI at {cli}")
    c = assay.generate("softmax", 5, max_dim=64)
    c["variant"] = "triton_fused"
    assay.write_entry(str(tmp_path), c)
    unknown = subprocess.run([cli, "replay", str(tmp_path)], capture_output=True, text=True)
    assert unknown.returncode == 2 and "no variant 'triton_fused'" in unknown.stderr
    r = subprocess.run([cli, "replay", "--variant", "online", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0 and "1 entries" in r.stdout and "0 unreadable" in r.stdout, r.stdout + r.stderr
