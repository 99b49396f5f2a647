#!/usr/bin/env python3
"""Runs one assay checking command with --json and --junit and checks both reports.

    check_reports.py [--rc N] [--skipped] [--seed] [--min-tests N] [--failures N] -- ASSAY ARGS...

Asserts: the exit status is N; the JUnit XML parses and has one <testsuite> named
assay.<command>... whose counts match its <testcase>s, each testcase with its own time
(a non-negative number); <properties> name the device, the version and git revision (and the
seed with --seed); with --skipped, the suite is marked skipped with a reason and every
testcase is skipped; the JSON report agrees (status, tests, skip_reason). Exit 0 on success,
1 with the first broken expectation, 77 (skip) where a GPU is present.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def fail(msg):
    print(f"check_reports: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rc", type=int, default=0)
    ap.add_argument("--skipped", action="store_true")
    ap.add_argument("--seed", action="store_true")
    ap.add_argument("--min-tests", type=int, default=1)
    ap.add_argument("--failures", type=int, default=0)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    # The expectations are those of a machine without a GPU; with one the command runs for real.
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        print("check_reports: a GPU is present; this test is for machines without one")
        sys.exit(77)
    if len(cmd) < 2:
        fail("no command")
    with tempfile.TemporaryDirectory() as d:
        jpath, xpath = os.path.join(d, "r.json"), os.path.join(d, "r.xml")
        p = subprocess.run(cmd + ["--json", jpath, "--junit", xpath], capture_output=True, text=True)
        sys.stdout.write(p.stdout)
        sys.stderr.write(p.stderr)
        if p.returncode != a.rc:
            fail(f"exit status {p.returncode}, expected {a.rc}")
        for path in (jpath, xpath):
            if not os.path.exists(path):
                fail(f"{os.path.basename(path)} was not written")
        root = ET.parse(xpath).getroot()
        suites = root.findall("testsuite")
        if root.tag != "testsuites" or len(suites) != 1:
            fail("expected <testsuites> with one <testsuite>")
        s = suites[0]
        command = cmd[1].replace(" ", "_")
        if not s.get("name", "").startswith("assay." + command):
            fail(f"suite name {s.get('name')!r} does not start with assay.{command}")
        cases = s.findall("testcase")
        if len(cases) < a.min_tests or int(s.get("tests")) != len(cases):
            fail(f"{len(cases)} testcases (suite says {s.get('tests')}), expected at least {a.min_tests}")
        failed = [c for c in cases if c.find("failure") is not None]
        skipped = [c for c in cases if c.find("skipped") is not None]
        if int(s.get("failures")) != len(failed) or int(s.get("skipped")) != len(skipped):
            fail("suite failure/skipped counts do not match its testcases")
        if len(failed) != a.failures:
            fail(f"{len(failed)} failing testcases, expected {a.failures}")
        for c in cases:
            t = float(c.get("time"))
            if not t >= 0:
                fail(f"testcase {c.get('name')} has time {t}")
        props = {p.get("name"): p.get("value") for p in s.find("properties").findall("property")}
        for k in ["device", "assay_version", "git_revision", "status"] + (["seed"] if a.seed else []):
            if not props.get(k):
                fail(f"property {k} missing")
        j = json.load(open(jpath))
        # A command that ran nothing has no JSON tests and one JUnit testcase carrying the reason.
        placeholder = a.skipped and not j["tests"] and len(cases) == 1
        if len(j["tests"]) != len(cases) and not placeholder:
            fail(f"JSON has {len(j['tests'])} tests, JUnit {len(cases)} testcases")
        if a.seed and j.get("seed") is None:
            fail("JSON report has no seed")
        if a.skipped:
            if not skipped or len(skipped) != len(cases) - len(failed):
                fail("a skipped run must mark every testcase that did not fail as skipped")
            if not props.get("skip_reason") or not j.get("skip_reason") or j["status"] not in ("skipped", "failed"):
                fail("a skipped run must carry its reason")
            if props.get("device") != "none":
                fail("a skipped run names no device")
        print(f"check_reports: {s.get('name')}: {len(cases)} testcases, {len(failed)} failed, "
              f"{len(skipped)} skipped: ok")


if __name__ == "__main__":
    main()
