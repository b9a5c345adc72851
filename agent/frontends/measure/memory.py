"""A server's memory under `agent bench`: resident memory (psutil) and NVIDIA VRAM (NVML or nvidia-smi).

The seed measured VRAM by hand, before and after loading each server. `MemoryWatch` does it per
profile: the machine's figures before the server starts, the server's once it is ready, and the peak
while it works (a sampling thread, plus the kernel's own high-water mark of the resident set).

VRAM comes from NVML (`nvidia-ml-py`, cheap enough to sample every half second) or, without it, from
`nvidia-smi` (a process per reading: sampled every two seconds). The server's own share comes from the
driver's per-process list; in a container whose PIDs the driver does not see, only the device total is
known, and the before/after difference is the figure to read. No NVIDIA GPU: no VRAM figures, not zeros.

This module imports nothing else of the agent, so it can be checked on a GPU machine on its own.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIB = 1024 * 1024


def rss_mib(pids: set[int]) -> float | None:
    """The resident memory of these processes, summed; None when none of them exists."""
    import psutil

    total, found = 0, False
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(pid).memory_info().rss
            found = True
    return total / MIB if found else None


def peak_rss_mib(pid: int) -> float | None:
    """The kernel's high-water mark of the process's resident set (VmHWM, Linux), or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def process_tree(pid: int) -> set[int]:
    """`pid` and its descendants (a server started through a wrapper runs as its child)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        return {pid, *(child.pid for child in proc.children(recursive=True))}
    except psutil.Error:
        return {pid}


def system_used_mib() -> float:
    import psutil

    vm = psutil.virtual_memory()
    return (vm.total - vm.available) / MIB


def listening_pid(port: int) -> int | None:
    """The local process listening on this TCP port (for a server attached with --base-url), if visible."""
    import psutil

    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            return conn.pid
    return None


@dataclass
class GpuSample:
    used_mib: float  # every device, summed
    process_mib: float | None  # the watched processes' own, when the driver lists them


class GpuProbe:
    """Reads NVIDIA VRAM through NVML or nvidia-smi. `find()` gives None when there is no such GPU."""

    def __init__(self, backend: str, devices: list[dict[str, Any]]) -> None:
        self.backend = backend  # "nvml" | "nvidia-smi"
        self.devices = devices  # index, name, total_mib
        self.interval = 0.5 if backend == "nvml" else 2.0

    @classmethod
    def find(cls) -> GpuProbe | None:
        probe = cls._nvml()
        if probe is None and shutil.which("nvidia-smi"):
            probe = cls._smi()
        return probe

    @classmethod
    def _nvml(cls) -> GpuProbe | None:
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception:  # no package, no driver, no device: NVMLError has many subclasses
            return None
        try:
            devices = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                name = pynvml.nvmlDeviceGetName(handle)
                total = pynvml.nvmlDeviceGetMemoryInfo(handle).total
                devices.append({"index": i, "name": _text(name), "total_mib": round(total / MIB)})
        except Exception:
            with contextlib.suppress(Exception):
                pynvml.nvmlShutdown()
            return None
        if not devices:
            pynvml.nvmlShutdown()
            return None
        return cls("nvml", devices)

    @classmethod
    def _smi(cls) -> GpuProbe | None:
        rows = _smi_rows("--query-gpu=index,name,memory.total")
        devices = [
            {"index": int(r[0]), "name": r[1], "total_mib": round(float(r[2]))} for r in rows if len(r) >= 3
        ]
        return cls("nvidia-smi", devices) if devices else None

    def sample(self, pids: set[int]) -> GpuSample | None:
        try:
            return self._sample_nvml(pids) if self.backend == "nvml" else self._sample_smi(pids)
        except Exception:  # a reading that fails (driver reset, nvidia-smi hung) is skipped, not fatal
            return None

    def _sample_nvml(self, pids: set[int]) -> GpuSample:
        import pynvml

        used, own, listed = 0.0, 0.0, False
        for device in self.devices:
            handle = pynvml.nvmlDeviceGetHandleByIndex(device["index"])
            used += pynvml.nvmlDeviceGetMemoryInfo(handle).used / MIB
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid in pids and proc.usedGpuMemory is not None:
                    own += proc.usedGpuMemory / MIB
                    listed = True
        return GpuSample(used, own if listed else None)

    def _sample_smi(self, pids: set[int]) -> GpuSample:
        used = sum(float(r[0]) for r in _smi_rows("--query-gpu=memory.used") if r and _is_number(r[0]))
        own, listed = 0.0, False
        for row in _smi_rows("--query-compute-apps=pid,used_memory"):
            if len(row) >= 2 and row[0].isdigit() and int(row[0]) in pids and _is_number(row[1]):
                own += float(row[1])
                listed = True
        return GpuSample(used, own if listed else None)

    def close(self) -> None:
        if self.backend == "nvml":
            with contextlib.suppress(Exception):
                import pynvml

                pynvml.nvmlShutdown()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _smi_rows(query: str) -> list[list[str]]:
    try:
        done = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return [[cell.strip() for cell in line.split(",")] for line in done.stdout.splitlines() if line.strip()]


class MemoryWatch:
    """One profile's memory: `before_load()`, then `watch(pid)` once the server is ready, then `stop()`.

    For a server that was already running (reused, or attached), skip `before_load()`: its "before"
    figures are then None, as they are unknown.
    """

    def __init__(self, gpu: GpuProbe | None = None, interval: float = 0.5) -> None:
        self.gpu = gpu
        self.interval = max(interval, gpu.interval) if gpu else interval
        self.pid: int | None = None
        self.pids: set[int] = set()
        self.system_before: float | None = None
        self.system_loaded: float | None = None
        self.vram_before: float | None = None
        self.rss_loaded: float | None = None
        self.rss_peak: float | None = None
        self.rss_end: float | None = None
        self.vram_loaded: GpuSample | None = None
        self.vram_peak: float | None = None
        self.vram_process_peak: float | None = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def before_load(self) -> None:
        self.system_before = system_used_mib()
        if self.gpu and (sample := self.gpu.sample(set())):
            self.vram_before = sample.used_mib

    def watch(self, pid: int | None) -> None:
        """Start watching the ready server (None: its process is not visible from here)."""
        self.system_loaded = system_used_mib()
        if pid is None:
            return
        self.pid, self.pids = pid, process_tree(pid)
        self.rss_loaded = rss_mib(self.pids)
        if self.gpu:
            self.vram_loaded = self.gpu.sample(self.pids)
        self._take()
        self._thread = threading.Thread(target=self._loop, name="bench-memory", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._take()

    def _take(self) -> None:
        rss = rss_mib(self.pids)
        if rss is not None:
            self.rss_peak = max(self.rss_peak or 0.0, rss)
            self.rss_end = rss
        if self.gpu and (sample := self.gpu.sample(self.pids)):
            self.vram_peak = max(self.vram_peak or 0.0, sample.used_mib)
            if sample.process_mib is not None:
                self.vram_process_peak = max(self.vram_process_peak or 0.0, sample.process_mib)
        self.samples += 1

    def stop(self) -> dict[str, Any]:
        """Stop sampling (before the server stops) and give the figures, in MiB."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=10)
            self._take()
            hwm = peak_rss_mib(self.pid) if self.pid else None
            if hwm is not None:
                self.rss_peak = max(self.rss_peak or 0.0, hwm)
        report: dict[str, Any] = {
            "pid": self.pid,
            "rss_mib": {"loaded": _r(self.rss_loaded), "peak": _r(self.rss_peak), "end": _r(self.rss_end)},
            "system_used_mib": {"before": _r(self.system_before), "loaded": _r(self.system_loaded)},
            "samples": self.samples,
            "vram": None,
        }
        if self.gpu:
            loaded = self.vram_loaded
            report["vram"] = {
                "backend": self.gpu.backend,
                "devices": self.gpu.devices,
                "before_mib": _r(self.vram_before),
                "loaded_mib": _r(loaded.used_mib if loaded else None),
                "peak_mib": _r(self.vram_peak),
                "process_loaded_mib": _r(loaded.process_mib if loaded else None),
                "process_peak_mib": _r(self.vram_process_peak),
            }
        return report


def _r(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    import os
    import platform

    import psutil

    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = None
    with contextlib.suppress(OSError):
        load = [round(x, 2) for x in os.getloadavg()]
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu or platform.processor(),
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 1024**3, 1),
        "load_average": load,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
