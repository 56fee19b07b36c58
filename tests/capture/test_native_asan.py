"""The C row decoder under AddressSanitizer: test_nativeblock.py's and test_nativejson.py's fuzz and differential
tests, and the marker fill; the merge's C scanner (cdc/spark/_scan.c) with tests/spark/test_scan_native.py; the
snapshot's C reader and its binary rows (cdc/snapshot/_native*.c) with tests/snapshot/test_binary.py and test_native.py.

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
# argv: the extension's module name, its ASan build, the module that loads it, pytest's arguments.
_RUN = """
import importlib, importlib.util, sys
name, path, loader = sys.argv[1:4]
spec = importlib.util.spec_from_file_location(name, path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sys.modules[name] = module
assert importlib.import_module(loader).native_module() is module
import pytest
sys.exit(pytest.main(["-q", "-n", "0", "-p", "no:cacheprovider", "-p", "no:randomly", *sys.argv[4:]]))
"""


def _build(target: Path, sources: list[Path], stem: str) -> Path:
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler")
    out = target / (stem + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer",
                    f"-I{sysconfig.get_paths()['include']}", *map(str, sources), "-o", str(out)], check=True)
    return out


def _passes_under_asan(name: str, module: Path, loader: str, *tests: str) -> None:
    """The tests pass in a fresh Python whose extension `name` is `module`, an ASan build, with ASan preloaded."""
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    env = {**os.environ, "LD_PRELOAD": libasan, "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
           "PYTHONMALLOC": "malloc", "CDC_NATIVE": "1", "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", _RUN, name, str(module), loader, *tests],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert "AddressSanitizer" not in run.stderr, run.stderr[-4000:]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout


@pytest.mark.slow
def test_fuzz_corpus_under_address_sanitizer(tmp_path: Path) -> None:
    _passes_under_asan("cdc.rows._native", _build(tmp_path, SOURCES, "_native"), "cdc.rows.native",
                       str(ROOT / "tests/capture/test_nativeblock.py"), str(ROOT / "tests/capture/test_nativejson.py"),
                       str(ROOT / "tests/capture/test_txn.py") + "::test_c_marker_fill_equals_two_replaces")


# Its tests without Spark (a JVM does not start under ASan's preload).
LAKE_KEYS = [f"{ROOT}/tests/spark/test_lake_keys.py::{name}" for name in (
    "test_kept_lines_whose_key_the_lake_holds_go_to_files_of_their_own",
    "test_in_lake_is_refused_where_its_marks_could_be_wrong")]


@pytest.mark.slow
def test_merge_scanner_under_address_sanitizer(tmp_path: Path) -> None:
    """The hostile, cut, mutated lines of tests/spark/test_scan_native.py through the C scanner built with ASan, and
    tests/spark/test_latest.py's workloads through its reader of superseded lines (_latest.c), and its lookups of lake
    keys (tests/spark/test_lake_keys.py, _lakekeys.c)."""
    names = ("_scan.c", "_latest.c", "_flat.c", "_lakekeys.c")
    module = _build(tmp_path, [ROOT / "cdc" / "spark" / name for name in names], "_scan")
    _passes_under_asan("cdc.spark._scan", module, "cdc.spark.scan", str(ROOT / "tests/spark/test_scan_native.py"),
                       str(ROOT / "tests/spark/test_latest.py"), *LAKE_KEYS)


@pytest.mark.slow
def test_snapshot_reader_under_address_sanitizer(tmp_path: Path) -> None:
    """The snapshot's C reader with its binary-row conversion (cdc/snapshot/_native.c, _native_binary.c): real rows
    of every type over both protocols and damaged binary rows (tests/snapshot/test_binary.py), and the text rows'
    differential tests (tests/snapshot/test_native.py)."""
    sources = [ROOT / "cdc" / "snapshot" / "_native.c", ROOT / "cdc" / "snapshot" / "_native_binary.c",
               ROOT / "cdc" / "_native_floats.c"]
    _passes_under_asan("cdc.snapshot._native", _build(tmp_path, sources, "_native"), "cdc.snapshot.native",
                       str(ROOT / "tests/snapshot/test_binary.py"), str(ROOT / "tests/snapshot/test_native.py"))
