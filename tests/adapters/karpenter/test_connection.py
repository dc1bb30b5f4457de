"""The backend's options: validated up front, errors name the option."""

from __future__ import annotations

import socket

import pytest

from fleetgate.adapters.karpenter.connection import KarpenterOptions


def test_defaults_match_the_chart() -> None:
    opts = KarpenterOptions.from_mapping({"identity": "x"})
    assert opts.namespace == "fleetgate-system"
    assert opts.priority_class == "fleetgate-placeholder"
    assert opts.placeholder_image == "registry.k8s.io/pause:3.10"
    assert (opts.lease_duration, opts.renew_deadline, opts.retry_period) == (15.0, 10.0, 2.0)


def test_identity_defaults_to_the_pod_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "fleetgate-controller-abc")
    assert KarpenterOptions.from_mapping({}).identity == "fleetgate-controller-abc"


def test_unknown_option_is_named_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"cluster_options.namepsace: unknown option.*namespace"):
        KarpenterOptions.from_mapping({"namepsace": "x"})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lease_duration": "soon"}, r"cluster_options.lease_duration: 'soon' is not a number"),
        ({"retry_period": 0}, r"cluster_options.retry_period: must be positive"),
        ({"read_concurrency": 0}, r"cluster_options.read_concurrency: must be a positive integer"),
        ({"namespace": 3}, r"cluster_options.namespace: must be a string"),
        ({"lease_duration": 5, "renew_deadline": 10}, r"lease_duration > renew_deadline"),
    ],
)
def test_bad_values_name_the_option(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KarpenterOptions.from_mapping(options)


def test_numbers_from_yaml_strings_are_accepted() -> None:
    assert KarpenterOptions.from_mapping({"lease_duration": "20"}).lease_duration == 20.0


def test_identity_outside_a_pod_is_unique_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two controllers started on one host (no POD_NAME) must not share a Lease identity, or
    # both would believe they hold the lease.
    monkeypatch.delenv("POD_NAME", raising=False)
    first = KarpenterOptions.from_mapping({}).identity
    second = KarpenterOptions.from_mapping({}).identity
    host = socket.gethostname()
    assert first != second
    assert first.startswith(f"{host}_") and second.startswith(f"{host}_")
