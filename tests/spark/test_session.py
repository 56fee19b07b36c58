"""The driver JVM build_session launches runs with the JIT settings chosen for short merges."""

from __future__ import annotations

from typing import Any

from cdc.spark.session import JIT_OPTIONS


def test_driver_jvm_runs_with_the_jit_options(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    wanted = dict(option.removeprefix("-XX:").split("=") for option in JIT_OPTIONS.split())
    assert len(wanted) == 4
    assert {name: bean.getVMOption(name).getValue() for name in wanted} == wanted
