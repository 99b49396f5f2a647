"""The pytest plugin: skips without a GPU (with the reason), corpus cases as parametrised tests
with the case id as their id, JUnit through pytest's own, xdist workers mapped to GPUs."""
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import assay
from assay import pytest_plugin

PKG = str(Path(__file__).resolve().parents[1])

TEST_FILE = """
import assay

assay.Op("plugin_neg", params=[assay.extent("n", 1, 64)],
         tensors=[assay.tensor("X", ["n"], dtype="fp32"), assay.tensor("Y", ["n"], role="out", dtype="fp32")],
         reference=lambda p, t: -t["X"], bound=assay.bounds.ulp(0))

def fake_launch(t, p):
    raise AssertionError("never launched without a GPU")

test_neg = assay.check("plugin_neg", time=1, corpus={corpus!r}, name="fake")(fake_launch)
"""


def _entry(corpus: Path, variant: str) -> str:
    assay.Op("plugin_neg", params=[assay.extent("n", 1, 64)],
             tensors=[assay.tensor("X", ["n"], dtype="fp32"), assay.tensor("Y", ["n"], role="out", dtype="fp32")],
             reference=lambda p, t: -t["X"], bound=assay.bounds.ulp(0))
    c = assay.generate("plugin_neg", 3)
    c["variant"] = variant
    return assay.read_entry(assay.write_entry(str(corpus), c))["id"]


@pytest.mark.skipif(assay.gpu_available(), reason="checks the behaviour without a GPU")
def test_checks_skip_without_gpu_with_corpus_ids(pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", PKG)
    corpus = tmp_path / "corpus"
    cid = _entry(corpus, "fake")
    _entry(corpus, "someone_else")  # another variant's case is not this test's
    pytester.makepyfile(test_k=TEST_FILE.format(corpus=str(corpus)))
    xml = tmp_path / "junit.xml"
    r = pytester.runpytest_subprocess("-p", "assay.pytest_plugin", "-v", "-rs", f"--junitxml={xml}", f"--rootdir={pytester.path}")
    r.stdout.fnmatch_lines(["*test_neg?fuzz? SKIPPED*", f"*test_neg?{cid}? SKIPPED*", "*assay: no GPU*"])
    r.assert_outcomes(skipped=2)
    cases = ET.parse(xml).getroot().iter("testcase")
    names = sorted(c.get("name") for c in cases)
    assert names == sorted(["test_neg[fuzz]", f"test_neg[{cid}]"])


def test_report_header_names_the_gpu_state(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", PKG)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    r = pytester.runpytest_subprocess("-p", "assay.pytest_plugin")
    r.stdout.fnmatch_lines(["assay: * GPU(s)*"])
    r.assert_outcomes(passed=1)


def test_xdist_worker_gets_its_gpu(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    pytest_plugin._xdist_device()
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "5"
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    pytest_plugin._xdist_device()
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    pytest_plugin._xdist_device()  # not under xdist: left alone
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
