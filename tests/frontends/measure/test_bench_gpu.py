"""VRAM figures of `agent bench` on a real NVIDIA GPU: a child process takes 1 GiB of device memory
through the CUDA driver API, and `MemoryWatch` must see it, through NVML and through nvidia-smi.

Skipped where there is no NVIDIA GPU (CI). It imports only agent.frontends.measure.memory, so on a GPU machine
without the agent's other dependencies it runs as
`python3 -m pytest --noconftest -p no:cacheprovider tests/frontends/measure/test_bench_gpu.py`.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from agent.frontends.measure.memory import GpuProbe, MemoryWatch

GPU = GpuProbe.find()
pytestmark = pytest.mark.skipif(GPU is None, reason="no NVIDIA GPU (NVML or nvidia-smi) here")

TAKE_MIB = 1024
# The driver API through ctypes: no framework needed, and a plain cuMemAlloc (no managed memory).
HOLDER = f"""
import ctypes, sys, time
cuda = ctypes.CDLL("libcuda.so.1")
def ok(code, what):
    if code != 0:
        sys.exit(f"{{what}} failed: {{code}}")
ok(cuda.cuInit(0), "cuInit")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
ok(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
ok(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
ok(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t({TAKE_MIB} << 20)), "cuMemAlloc")
print("holding", flush=True)
sys.stdin.read()  # until the test closes our stdin
"""


@pytest.mark.parametrize("backend", ["nvml", "nvidia-smi"])
def test_vram_taken_by_a_process_is_seen(backend):
    probe = GpuProbe._nvml() if backend == "nvml" else GpuProbe._smi()
    if probe is None:
        pytest.skip(f"{backend} is not available here")
    assert probe.devices and probe.devices[0]["total_mib"] > 1024 and probe.devices[0]["name"]
    watch = MemoryWatch(probe, interval=0.1)
    watch.before_load()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "holding", "the CUDA allocation failed"
        time.sleep(0.5)
        watch.watch(holder.pid)
        time.sleep(max(1.0, 2 * probe.interval))
        report = watch.stop()
    finally:
        holder.stdin.close()
        holder.wait(30)
    vram = report["vram"]
    print(report)
    assert vram["backend"] == backend and vram["devices"] == probe.devices
    # The device total rises by the allocation (plus the context's own few hundred MiB)...
    assert vram["loaded_mib"] - vram["before_mib"] >= TAKE_MIB * 0.95, vram
    assert vram["peak_mib"] >= vram["loaded_mib"] * 0.99
    # ...and where the driver lists processes by our PIDs, the holder's own share shows it too.
    if vram["process_peak_mib"] is not None:
        assert vram["process_peak_mib"] >= TAKE_MIB * 0.95, vram
    probe.close()
