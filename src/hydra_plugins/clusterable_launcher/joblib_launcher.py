"""``hydra/launcher=joblib``: clusterable's joblib launcher (``_joblib``: Hydra's, made to stop on Ctrl-C and
SIGTERM), registered under Hydra's name where Hydra's joblib launcher is installed (the ``launchers`` extra:
``pip install 'clusterable[launchers]'``).

Without it this module registers nothing and imports cleanly, so Hydra's plugin scan, which imports every module
here on every command, prints no warning; ``hydra/launcher=joblib`` is then an option that does not exist, and the
command line names the extra (``clusterable.config.composition_error``).
"""

from __future__ import annotations

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

PLUGIN = "hydra_plugins.hydra_joblib_launcher"  # Hydra's joblib launcher, which ours extends

try:
    from hydra_plugins.hydra_joblib_launcher.config import JobLibLauncherConf

    from hydra_plugins.clusterable_launcher._joblib import JoblibLauncher
except ModuleNotFoundError as e:  # only Hydra's plugin may be missing: any other import error is a bug
    if not (e.name or "").startswith(PLUGIN):
        raise
else:
    __all__ = ["JoblibLauncher"]
    # Hydra's joblib options for this launcher, stored after Hydra's (imported above) under its name, so that
    # ``hydra/launcher=joblib`` as users type it selects this one; Hydra's plugin scan executes this module again on
    # every scan, storing it again. (A node, not a dataclass: the scan executes this module outside ``sys.modules``,
    # where a dataclass cannot resolve its annotations.)
    ConfigStore.instance().store(
        group="hydra/launcher",
        name="joblib",
        node=OmegaConf.merge(
            OmegaConf.structured(JobLibLauncherConf),
            # The class's own module: Hydra finds a plugin by the name it registered it under.
            {"_target_": "hydra_plugins.clusterable_launcher._joblib.JoblibLauncher"},
        ),
        provider="clusterable",
    )
