"""CPU tests of the Python package: the ctypes binding and the pytest plugin, no torch, no GPU
(kernels are fake numpy launchers judged through the core's host evaluation)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pytest_plugins = ["pytester"]

import assay  # noqa: E402

if not assay.available():
    pytest.exit("libassay_capi.so not found: build it (ninja -C build assay_capi) or set ASSAY_CAPI", returncode=3)
