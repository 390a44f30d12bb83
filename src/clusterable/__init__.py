"""clusterable: learn representations that cluster, and regenerate the papers that study them."""

# Registers the configs' resolvers (``${tuned_lambda:...}`` in src/clusterable/conf/loss, ``${run_mode:}``, ...): the
# configs must load wherever the package is imported, not only under train.py.
from clusterable import resolvers as _resolvers  # noqa: F401

# The one place the version is written: pyproject.toml reads it ([tool.setuptools.dynamic]); CITATION.cff and
# CHANGELOG.md repeat it, and tests/test_packaging.py checks they agree.
__version__ = "0.1.0"
