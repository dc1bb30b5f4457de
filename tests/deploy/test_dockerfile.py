"""The image build is pinned: base image by digest, uv by version, dependencies by hash."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "deploy" / "Dockerfile").read_text()


def _instructions() -> list[str]:
    return [line for line in DOCKERFILE.splitlines() if line and not line.startswith("#")]


def test_every_base_image_is_pinned_by_digest() -> None:
    [arg] = [line for line in _instructions() if line.startswith("ARG PYTHON_IMAGE=")]
    assert re.fullmatch(r"ARG PYTHON_IMAGE=python:3\.11-slim@sha256:[0-9a-f]{64}", arg)
    froms = [line.split()[1] for line in _instructions() if line.startswith("FROM ")]
    assert froms == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]


def test_uv_is_pinned_and_the_export_keeps_hashes_that_pip_requires() -> None:
    assert re.search(r"pip install --no-cache-dir uv==\d+\.\d+\.\d+\b", DOCKERFILE)
    export = next(line for line in _instructions() if "uv export" in line)
    assert "--frozen" in export and "--no-hashes" not in export
    assert "--require-hashes -r /tmp/fleetgate/requirements.txt" in DOCKERFILE
    assert "--no-deps /tmp/fleetgate/wheels/*.whl" in DOCKERFILE  # nothing resolved afresh
