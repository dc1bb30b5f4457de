"""Node request bodies: numbers are numbers, never booleans (the OpenAPI document says so)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fleetgate.apps.api.schemas.nodes import MetricsPut


@pytest.mark.parametrize(
    "body",
    [
        {"cpu_load_1": False, "cpu_schedulable": 0},
        {"cpu_load_1": True, "cpu_schedulable": 0},
        {"cpu_load_1": 0.5, "cpu_schedulable": False},
        {"cpu_load_1": "1.5", "cpu_schedulable": 0},
    ],
)
def test_metrics_refuse_what_is_not_a_json_number(body: dict[str, object]) -> None:
    with pytest.raises(ValidationError) as caught:
        MetricsPut.model_validate(body)
    assert len(caught.value.errors()) == 1


def test_metrics_take_integers_and_floats_for_the_load() -> None:
    assert MetricsPut.model_validate({"cpu_load_1": 2, "cpu_schedulable": 4}).cpu_load_1 == 2.0
    assert (
        MetricsPut.model_validate({"cpu_load_1": 0.25, "cpu_schedulable": None}).cpu_load_1 == 0.25
    )


def test_the_schema_declares_the_load_a_number() -> None:
    load = MetricsPut.model_json_schema()["properties"]["cpu_load_1"]
    assert {"type": "number", "minimum": 0} in [
        {k: v for k, v in option.items() if k in ("type", "minimum")} for option in load["anyOf"]
    ]
