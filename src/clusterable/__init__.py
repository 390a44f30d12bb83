"""clusterable: learn representations that cluster, and regenerate the papers that study them."""

__version__ = "0.1.0"
