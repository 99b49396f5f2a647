"""python -m assay: replay stored cases with a Python launcher, list ops.

    python -m assay replay CORPUS_ENTRY... --launch examples/triton/test_softmax.py:test_softmax_dropped_tail

--launch names a launcher function, or an @assay.check test (then its variant name and contract
come with it: the contract's declared arithmetic decides the bound).
    python -m assay list
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path

from . import AssayError, corpus_entries, list_ops, read_entry, run_case


def load_launch(spec: str):
    """module:function or path/to/file.py:function."""
    mod_name, _, fn = spec.rpartition(":")
    if not mod_name or not fn:
        raise SystemExit(f"--launch {spec}: expected MODULE:FUNCTION or FILE.py:FUNCTION")
    if mod_name.endswith(".py"):
        path = Path(mod_name).resolve()
        sys.path.insert(0, str(path.parent))
        s = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(s)
        sys.modules[path.stem] = mod
        s.loader.exec_module(mod)
    else:
        mod = importlib.import_module(mod_name)
    f = getattr(mod, fn)
    spec = getattr(f, "_assay_check", None)
    if spec is not None:  # an @assay.check test: its launcher, variant name and contract
        return spec.launch, spec.name, spec.contract
    return f, None, None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m assay")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("replay", help="replay corpus entries (files or folders)")
    r.add_argument("paths", nargs="+")
    r.add_argument("--launch", help="the Python launcher or @assay.check test, MODULE:NAME or FILE.py:NAME")
    r.add_argument("--variant", action="append", help="run these registered variants instead")
    r.add_argument("--device", type=int, default=0)
    sub.add_parser("list", help="registered ops")
    a = ap.parse_args(argv)
    if a.cmd == "list":
        print("\n".join(list_ops()))
        return 0
    launch, name, contract = load_launch(a.launch) if a.launch else (None, None, None)
    entries = []
    for p in a.paths:
        entries += corpus_entries(p) if Path(p).is_dir() else [read_entry(p)]
    failing = 0
    for e in entries:
        try:
            verdicts = run_case(e["case"], launch, variant_name=name, contract=contract, variants=a.variant,
                                device=a.device)
        except AssayError as err:
            print(f"error {e['path']}: {err}")
            return 2
        for v in verdicts:
            state = "n/a" if v.not_applicable else ("pass" if v.passed else "FAIL")
            failing += state == "FAIL"
            print(f"{state} {e['path']} [{v.variant}]: {v.not_applicable or v.summary}")
    print(f"replay: {len(entries)} entries, {failing} failing")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
