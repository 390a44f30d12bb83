"""clusterable: learn representations that cluster, and regenerate the papers that study them."""

# Registers the configs' resolvers (``${tuned_lambda:...}`` in conf/loss, ``${run_mode:}``, ...): the configs must
# load wherever the package is imported, not only under train.py.
from clusterable import resolvers as _resolvers  # noqa: F401

__version__ = "0.1.0"
