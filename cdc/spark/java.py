"""The Java runtime Spark needs: which java is used, and a clear refusal when it is missing or too old.

Checked before a session starts, because PySpark's own failure is a page of traceback ending in
JAVA_GATEWAY_EXITED that names neither the java it ran nor what to install.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pyspark

from cdc.errors import PreconditionError

# PySpark 4 runs on Java 17 or 21; 3.5 still ran on 8 and 11.
MIN_JAVA = 17 if int(pyspark.__version__.split(".")[0]) >= 4 else 8
_JAVA_HINT = (f"install a Java {MIN_JAVA}+ runtime (Debian/Ubuntu: apt-get install openjdk-17-jre-headless; "
              "macOS: brew install openjdk@17), or point JAVA_HOME at one")


def require_java() -> None:
    """Refuse to start Spark without a usable Java, naming the java looked at and what to install."""
    java = java_path()
    source = "JAVA_HOME" if os.environ.get("JAVA_HOME") else "PATH"
    try:
        shown = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PreconditionError(f"Spark needs Java {MIN_JAVA}+, and {java} (from {source}) cannot run: {exc}",
                                hint=_JAVA_HINT) from None
    major = java_major(shown.stderr + shown.stdout)
    if shown.returncode != 0 or major is None:
        raise PreconditionError(f"Spark needs Java {MIN_JAVA}+, and `{java} -version` (from {source}) failed: "
                                f"{(shown.stderr or shown.stdout).strip()[:200]}", hint=_JAVA_HINT)
    if major < MIN_JAVA:
        raise PreconditionError(f"Spark needs Java {MIN_JAVA}+, and {java} (from {source}) is Java {major}",
                                hint=_JAVA_HINT)


def java_major(version_text: str) -> int | None:
    """The major version in `java -version`'s text: 'openjdk version "17.0.15"' -> 17, '"1.8.0_392"' -> 8."""
    found = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if found is None:
        return None
    first = int(found.group(1))
    return int(found.group(2) or 0) if first == 1 else first


def java_path() -> str:
    """The java Spark's launcher runs: JAVA_HOME's, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")
