"""What one ``search.tune`` run is asked to do: :class:`TuneConfig` (built from the command line by
``search.tune.config_from_args``; every role module reads it, none imports the CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .storage import DEFAULT_STALE_AFTER_S

DEFAULT_STORAGE = "sqlite:///tiledsl-tune.db"
DEFAULT_DEVICE = "H200"


@dataclass
class TuneConfig:
    """Everything one run needs (built from the command line by ``search.tune.config_from_args``).

    ``model_prune``: ``--model-prune FACTOR`` (None: off): a sampled schedule whose predicted time exceeds
    FACTOR × the best prediction among this study's evaluated trials is told PRUNED without being compiled
    or measured (:class:`search.strategy.ModelPruner`).
    """

    family: str
    op: object
    trials: int = 200
    timeout_s: float | None = None
    sampler: str = "tpe"
    seed: int = 0
    storage: str = DEFAULT_STORAGE
    study_name: str | None = None
    export: str | None = None
    export_default: bool = False  # no --export: write the results into tune-out/<study name>/
    report_json: str | None = None
    model_only: bool = False
    device: str | None = None
    jobs: int | None = None
    seed_top: int = 8
    compile_top: int = 3
    final_top: int = 5
    ship: bool = False
    progress: bool = True
    command: str = ""
    notes: list = field(default_factory=list)
    stale_after_s: int = DEFAULT_STALE_AFTER_S
    gpus: tuple[int, ...] | None = None  # --gpus resolved to device indices; None: not given (the current device)
    model_prune: float | None = None
    mma: str = "auto"  # gemm: "dmma" searches the FP64 tensor-core GEMV space (search.space.gemv_dmma_space)
