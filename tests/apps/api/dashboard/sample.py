"""A hand-written dashboard snapshot, shaped as ``fleetgate.apps.up.status`` builds them."""

from __future__ import annotations

from typing import Any

NOW = "2024-01-01T10:05:00+00:00"


def node(name: str, used_cpus: int, **over: Any) -> dict[str, Any]:
    """A node entry with 24 vCPU, 32 GB and 400 GB limits."""
    base: dict[str, Any] = {
        "name": name,
        "pool": "general",
        "schedulable": True,
        "cordoned_by": None,
        "role": "ready",
        "placements": 3,
        "limits": {"cpus": 24, "memory_mb": 32768, "disk_gb": 400},
        "used": {"cpus": used_cpus, "memory_mb": 4096, "disk_gb": 40},
        "expected_demand": 1.2,
        "load": 2.5,
        "cpu_schedulable": 8,
        "demand": 3.7,
        "budget": 6.0,
        "lifetime": {
            "age": "30h",
            "age_seconds": 30 * 3600.0,
            "A": "46h43m",
            "A_seconds": 46 * 3600.0 + 43 * 60,
            "expires_at": "2024-01-03T04:05:00+00:00",
        },
    }
    return {**base, **over}


def snapshot(**over: Any) -> dict[str, Any]:
    """A snapshot with two nodes, a claim, one pool mid-rotation and two events."""
    base: dict[str, Any] = {
        "now": NOW,
        "clock": "virtual",
        "started": "2024-01-01T09:45:00+00:00",
        "elapsed": "20m",
        "speed": 600.0,
        "target_load": 0.75,
        "cluster": {
            "total": {"cpus": 48, "memory_mb": 65536, "disk_gb": 800},
            "claimed": {"cpus": 16, "memory_mb": 20000, "disk_gb": 200},
            "unclaimed_used": {"cpus": 10, "memory_mb": 4096, "disk_gb": 40},
        },
        "nodes": [
            node("general-0001", 30, role="rotating", schedulable=False, cordoned_by="cluster"),
            node("general-0002", 18),
        ],
        "claims": [
            {
                "id": "c-1",
                "namespace": "ci",
                "state": "active",
                "limit": {"cpus": 16, "memory_mb": 20000, "disk_gb": 200},
                "used": {"cpus": 8, "memory_mb": 8192, "disk_gb": 80},
                "expires_at": "2024-01-31T09:45:00+00:00",
                "expires_in": "29d23h40m",
            }
        ],
        "namespaces": [
            {
                "namespace": "ci",
                "placements": 4,
                "used": {"cpus": 8, "memory_mb": 8192, "disk_gb": 80},
                "claimed": True,
            },
            {
                "namespace": "web",
                "placements": 2,
                "used": {"cpus": 10, "memory_mb": 4096, "disk_gb": 40},
                "claimed": False,
            },
        ],
        "pools": [
            {
                "name": "general",
                "nodes": 2,
                "labels": {"fleetgate.io/rotation": "general"},
                "governance": {"status": "governed", "detail": ""},
                "policy": "general",
                "window_open": True,
                "reason": None,
                "derivation": {
                    "A": "46h43m",
                    "G": 2,
                    "C": 18,
                    "P": "12h",
                    "t_rot": "1h17m",
                    "t_rot_est": "15m",
                    "findings": [
                        {
                            "severity": "warn",
                            "code": "KBelowTwo",
                            "side": "deadline",
                            "message": "minRotationChances is 1",
                        }
                    ],
                },
                "gate": None,
                "census": {"Total": 2, "Eligible": 1, "NotTriggered": 1},
                "active": {
                    "claim": "general-0001",
                    "state": "pending",
                    "surge": None,
                    "started_at": "2024-01-01T10:01:00Z",
                    "mode": "surge",
                },
                "timeline": {
                    "start": "2024-01-01T04:05:00+00:00",
                    "end": "2024-01-01T12:05:00+00:00",
                    "zone": "UTC",
                    "windows": [
                        {"start": "2024-01-01T10:00:00+00:00", "end": "2024-01-01T12:05:00+00:00"},
                    ],
                    "rotations": [
                        {
                            "claim": "general-0001",
                            "start": "2024-01-01T10:01:00+00:00",
                            "end": None,
                            "outcome": None,
                            "forceful": False,
                        }
                    ],
                },
            }
        ],
        "events": [
            {
                "id": 2,
                "at": "2024-01-01T10:04:00+00:00",
                "kind": "instance start redirected to another node",
                "subject": "p-1",
                "namespace": "ci",
                "level": "info",
                "data": {"node": "general-0001", "target_node": "general-0002"},
            },
            {
                "id": 1,
                "at": "2024-01-01T10:01:00+00:00",
                "kind": "RotationStarted",
                "subject": "general",
                "namespace": None,
                "level": "info",
                "data": {"message": "rotating NodeClaim general-0001"},
            },
        ],
        "reconciler": {
            "at": "2024-01-01T10:00:00+00:00",
            "nodes": 2,
            "drifted_nodes": 0,
            "claims_expired": 0,
            "duration_ms": 3.1,
            "clean": True,
        },
        "workload": {"admitted": 10, "refused": 0, "released": 2},
        "placements": 6,
    }
    return {**base, **over}
