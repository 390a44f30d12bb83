"""What the in-memory readers that may download their files (MNIST through torchvision, OrganAMNIST through
medmnist) share: a timeout on every socket operation of the download."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

# torchvision's urlopen (which medmnist uses too) has no timeout of its own; where packets are dropped rather than
# refused, a download attempt would otherwise hang for minutes before failing.
DOWNLOAD_TIMEOUT_S = 30.0


@contextlib.contextmanager
def socket_timeout(seconds: float) -> Iterator[None]:
    """Python's default socket timeout set to ``seconds`` for the ``with`` block, then restored."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)
