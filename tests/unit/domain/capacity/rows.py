"""The node rows and the request the guard and denial tests evaluate (capacity spec 4.2 style).

``NODE_A`` has room for ``REQUEST`` on every allocation dimension and almost no load;
``NODE_B`` is empty but its CPU load is far above the demand budget.
"""

from __future__ import annotations

NODE_A = {
    "schedulable": True,
    "limit_cpus": 12, "used_cpus": 8,
    "limit_memory_mb": 12288, "used_memory_mb": 8192,
    "limit_disk_gb": 120, "used_disk_gb": 80,
    "expected_demand": 0.0, "cpu_load_1": 0.5, "cpu_schedulable": 64,
}  # fmt: skip
NODE_B = {
    "schedulable": True,
    "limit_cpus": 64, "used_cpus": 0,
    "limit_memory_mb": 65536, "used_memory_mb": 0,
    "limit_disk_gb": 1000, "used_disk_gb": 0,
    "expected_demand": 0.0, "cpu_load_1": 50.0, "cpu_schedulable": 64,
}  # fmt: skip
REQUEST = {"cpus": 4, "memory_mb": 4096, "disk_gb": 40, "demand": 10.0, "target_load": 0.75}
