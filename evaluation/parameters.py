"""The generator's and the experiments' parameters: thesis Appendix C as a JSON file a
user can edit (``evaluation/params/experiment1.json``, ``experiment2.json``).

The Appendix C keys keep their names and meaning. Pingo adds ``seed``, ``storage_mb``,
``decision`` and ``ideal`` (see ``_comment`` in the shipped files). Keys starting with
``_`` are comments; any other unknown key is an error, so a typo is not silently ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

PARAMS_DIR = Path(__file__).resolve().parent / "params"


class Normal(BaseModel):
    """A normal distribution; the generator takes ``abs()`` of draws where a count or
    size must be positive, as Appendix B does for the numbers of children and parents."""

    model_config = ConfigDict(extra="forbid")
    mean: float
    std: float = Field(ge=0)


class Share(BaseModel):
    """The share of a workflow's actions taken from previous workflows. ``mean`` is a list
    in experiment 2 (one run per value)."""

    model_config = ConfigDict(extra="forbid")
    mean: float | list[float]
    std: float = Field(ge=0)

    @field_validator("mean")
    @classmethod
    def _in_unit_interval(cls, v: float | list[float]) -> float | list[float]:
        for x in v if isinstance(v, list) else [v]:
            if not 0.0 <= x <= 1.0:
                raise ValueError(f"a share must be between 0 and 1, got {x}")
        if isinstance(v, list) and not v:
            raise ValueError("give at least one share")
        return v

    def means(self) -> list[float]:
        return list(self.mean) if isinstance(self.mean, list) else [self.mean]


class WorkflowTemplate(BaseModel):
    """How generated COMMAND_LINE actions are written (Appendix C ``workflow``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str = "workflow"
    version: str = "1.0"
    main_class_name: str = "io.biblia.workflows.job.Main"
    action_folder: str = "/user/hadoop/examples/apps/scientific-workflows"
    name_node: str = Field("hdfs://localhost:8020", alias="nameNode")


class DecisionParams(BaseModel):
    """The decision service's settings in the simulator (``PINGO_THRESHOLD`` etc.)."""

    model_config = ConfigDict(extra="forbid")
    threshold: float = Field(1.0, gt=0)
    target: float = Field(1.0, gt=0)
    history_window: int = Field(10_000, ge=1)

    @field_validator("target")
    @classmethod
    def _target_not_above_threshold(cls, v: float, info: Any) -> float:
        threshold = info.data.get("threshold")
        if threshold is not None and v > threshold:
            raise ValueError(f"target ({v}) must not be above threshold ({threshold})")
        return v


class IdealParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    granularity_mb: float = Field(0.1, gt=0)


class GeneratorParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    nb_actions: int = Field(ge=1)
    action_size: Normal
    action_time: Normal
    workflow_size: Normal
    previous_actions: Share
    nb_children: Normal
    nb_parent: Normal
    workflow: WorkflowTemplate = Field(default_factory=WorkflowTemplate)
    seed: int = 0
    storage_mb: list[float] = Field(default_factory=lambda: [500.0])
    decision: DecisionParams = Field(default_factory=DecisionParams)
    ideal: IdealParams = Field(default_factory=IdealParams)

    @field_validator("storage_mb")
    @classmethod
    def _positive(cls, v: list[float]) -> list[float]:
        if not v or any(x <= 0 for x in v):
            raise ValueError("storage_mb must be a non-empty list of positive sizes in MB")
        return v

    def with_share(self, share: float) -> GeneratorParams:
        return self.model_copy(update={"previous_actions": Share(mean=share, std=self.previous_actions.std)})


class ParamsError(ValueError):
    pass


def parse_params(raw: Any, where: str = "parameters") -> GeneratorParams:
    if not isinstance(raw, dict):
        raise ParamsError(f"{where}: must be a JSON object")
    raw = {k: v for k, v in raw.items() if not (isinstance(k, str) and k.startswith("_"))}
    try:
        return GeneratorParams.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '$'}: {e['msg']}" for e in exc.errors())
        raise ParamsError(f"{where}: {problems}") from None


def load_params(path: str | Path) -> GeneratorParams:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ParamsError(f"cannot read {path}: {exc.strerror}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParamsError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    return parse_params(raw, str(path))


def shipped(experiment: int) -> GeneratorParams:
    return load_params(PARAMS_DIR / f"experiment{experiment}.json")
