"""What the optional integrations need installed: the loggers whose library is not a dependency of the package.

The ground floor: this module imports nothing of the project, so that both the preflight's domain table
(``domains``) and the run's own check (``run.parts.check_logger_extras``) name the same package to install.
"""

from __future__ import annotations

# A logger's class name -> (the modules any of which it runs with, the command that installs one). Lightning builds
# these loggers without their module and fails when the run first logs, after the data is loaded.
LOGGER_EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "WandbLogger": (("wandb",), "pip install 'clusterable[wandb]'"),
    "TensorBoardLogger": (("tensorboard", "tensorboardX"), "pip install tensorboard"),
    "MLFlowLogger": (("mlflow",), "pip install mlflow"),
    "AimLogger": (("aim",), "pip install aim"),
    "CometLogger": (("comet_ml",), "pip install comet_ml"),
    "NeptuneLogger": (("neptune",), "pip install neptune"),
}
