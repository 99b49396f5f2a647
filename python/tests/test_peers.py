"""The bench peers' command line: one JSON line and the documented exit codes."""

import json
import pathlib
import subprocess
import sys

PEER = pathlib.Path(__file__).resolve().parents[1] / "peers" / "peer_bench.py"


def run(*args):
    p = subprocess.run([sys.executable, str(PEER), *args], capture_output=True, text=True, timeout=120)
    return p.returncode, json.loads(p.stdout.strip().splitlines()[-1])


def test_an_op_without_a_peer_says_so():
    rc, j = run("--op", "rope", "--seconds", "0.1")
    assert rc == 4
    assert "no peer for rope" in j["skipped"]


def test_every_mode_answers_with_a_rate_or_a_reason():
    for mode in ("hypothesis", "loop"):
        rc, j = run("--op", "gemm", "--mode", mode, "--seconds", "0.2")
        assert j["op"] == "gemm" and j["mode"] == mode
        if rc == 3:  # no torch, hypothesis or GPU here: skipped with the reason
            assert j["skipped"]
        else:
            assert rc == 0, j
            assert j["cases"] > 0 and j["cases_per_second"] > 0
