"""Facts about the GPU and its measured peaks, cached as JSON in the cache directory.

The peaks (a device-to-device copy, an FMA-bound kernel, tensor-core MMA kernels) are measured once per
device and driver by the GPU worker; later calls read the cache. A cached entry from an older set of
measurements (``measurement_version`` below the current one, e.g. without tensor peaks) is measured
again. Without a device this returns None and never starts a worker. ``gpu`` picks the device by its index
among the visible ones (as ``EvalOptions.gpu`` does): the identity is asked of that device and its peaks are
measured by a worker pinned to it, so a machine with two kinds of GPU keeps one entry per kind.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from cuda_llm.paths import cache_dir
from cuda_llm.tools.device.device_probe import device_identity, has_cuda_device
from cuda_llm.results import DeviceInfo

_MEMO: dict[str, DeviceInfo] = {}
# 2: tensor-core peaks (fp16 and tf32 MMA) were added to the fp32 and bandwidth peaks.
MEASUREMENT_VERSION = 2


def _driver_identity(gpu: int = 0) -> tuple[str, str] | None:
    """(device name, driver version) through libcuda with ctypes, without pycuda."""
    return device_identity(gpu)


def cache_path(name: str, driver: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()
    return cache_dir() / "devices" / f"{slug}-drv{driver}.json"


def get_device_info(*, refresh: bool = False, timeout_s: float = 180.0, gpu: int | None = None) -> DeviceInfo | None:
    """DeviceInfo of the ``gpu``-th visible device (default the first; CUDA_VISIBLE_DEVICES applies), or None
    where there is no CUDA device."""
    if not has_cuda_device():
        return None
    ident = _driver_identity(gpu or 0)
    if ident is None:
        return None
    path = cache_path(*ident)
    key = str(path)
    if not refresh:
        if key in _MEMO:
            return _MEMO[key]
        if path.exists():
            try:
                info = DeviceInfo.model_validate_json(path.read_text())
                if info.measurement_version >= MEASUREMENT_VERSION:
                    _MEMO[key] = info
                    return info
            except ValueError:
                pass
    # local: `cuda-llm --help` loads this module; the worker runner is needed only to probe a device
    from cuda_llm.tools.harness.runner import run_worker
    from cuda_llm.tools.harness.worker_protocol import DeviceInfoResponse

    with tempfile.TemporaryDirectory(prefix="cuda-llm-dev-") as tmp:
        res = Path(tmp) / "device.json"
        out = run_worker(["device-info", "--result", str(res)], timeout_s=timeout_s, gpu=gpu)
        if out.rc != 0 or not res.exists():
            raise RuntimeError(f"measuring the device failed (exit {out.rc}, timed out {out.timed_out}):\n"
                               f"{out.stderr_tail()}\nIs pycuda installed (pip install -e '.[gpu]')?")
        info = DeviceInfoResponse.model_validate_json(res.read_text()).info
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info.model_dump(mode="json"), indent=1))
    _MEMO[key] = info
    return info
