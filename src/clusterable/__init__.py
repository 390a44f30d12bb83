"""clusterable: learn representations that cluster, and regenerate the papers that study them."""

# Registers ``${tuned_lambda:...}``, which the λ losses' configs (conf/loss) use: they must load wherever the
# package is imported, not only under train.py.
from clusterable import tuned_lambda as _tuned_lambda  # noqa: F401

__version__ = "0.1.0"
