"""The C row decoder under AddressSanitizer: test_nativeblock.py's and test_nativejson.py's fuzz and differential
tests, and the marker fill.

Builds cdc/rows/_native*.c (one extension) with -fsanitize=address into a temporary directory, then runs
tests/capture/test_nativeblock.py, test_nativejson.py (MySQL 8's binary JSON) and test_txn.py's test of the
C marker fill (issue 28) in a fresh Python with ASan preloaded and that build standing in for the installed
extension (PYTHONMALLOC=malloc, so the decoder's buffers are ASan's too). Any read or write outside a buffer
aborts the run with ASan's report.
Slow: run it with `-m slow`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "cdc" / "rows" / name
           for name in ("_native.c", "_native_image.c", "_native_numbers.c", "_native_types.c", "_native_json.c")]
SOURCES.append(ROOT / "cdc" / "_native_floats.c")
_RUN = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("cdc.rows._native", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sys.modules["cdc.rows._native"] = module
from cdc.rows import native
assert native.native_module() is module, native.PROBLEM
import pytest
sys.exit(pytest.main(["-q", "-n", "0", "-p", "no:cacheprovider", "-p", "no:randomly", *sys.argv[2:]]))
"""


def _build(target: Path) -> Path:
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler")
    out = target / ("_native" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer",
                    f"-I{sysconfig.get_paths()['include']}", *map(str, SOURCES), "-o", str(out)], check=True)
    return out


@pytest.mark.slow
def test_fuzz_corpus_under_address_sanitizer(tmp_path: Path) -> None:
    module = _build(tmp_path)
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    env = {**os.environ, "LD_PRELOAD": libasan, "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
           "PYTHONMALLOC": "malloc", "CDC_NATIVE": "1", "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", _RUN, str(module), str(ROOT / "tests/capture/test_nativeblock.py"),
                          str(ROOT / "tests/capture/test_nativejson.py"),
                          str(ROOT / "tests/capture/test_txn.py") + "::test_c_marker_fill_equals_two_replaces"],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert "AddressSanitizer" not in run.stderr, run.stderr[-4000:]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout
