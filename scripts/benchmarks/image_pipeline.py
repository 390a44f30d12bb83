"""Training images/s of the decoded cache + batched augmentation against an ImageFolder-style DataLoader decoding
JPEGs per sample (2 workers, same transforms). Goal: ratio >= 3."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from .common import best_of, cuda_sync


def measure() -> dict:
    """Training images per second of ``ImageDataModule`` (the decoded cache, batches read by a prefetching thread,
    the CUB recipe's crop + flip + colour jitter batched on the training device) against a torchvision
    ImageFolder-style ``DataLoader`` that decodes every JPEG and applies torchvision's per-sample transforms
    (the same recipe, Boudiaf et al.'s ``get_transforms``), ``num_workers=2``, batch 128, ``drop_last``.

    512 synthetic JPEGs of about 500 x 375 (CUB's usual size, portrait and landscape) in CUB-200-2011's real
    layout. Both pipelines hand the batch to the device and wait for it; the one-off cache build is excluded
    from the timing and reported (``image_pipeline_cache_build_s``). Goal: ratio >= 3.
    """
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset
    from torchvision import transforms as T

    from clusterable.data.folders import ImageDataModule
    from clusterable.data.folders.augment import Augment
    from clusterable.data.folders.retrieval_sets import read_cub200

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n, batch_size, classes = 512, 128, 16
    root = Path(tempfile.mkdtemp(prefix="bench_image_pipeline_"))
    base = root / "CUB_200_2011"
    rng = np.random.default_rng(0)
    shapes = [(375, 500), (500, 375), (333, 500), (375, 500), (400, 500), (500, 332)]
    images, labels = [], []
    for i in range(n + 2):  # the last two: one test class, so that the reader has its two parts
        c = 1 + i % classes if i < n else 101
        relative = f"{c:03d}.Class_{c}/img_{i:04d}.jpg"
        h, w = shapes[i % len(shapes)]
        coarse = Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize((w, h), Image.BICUBIC)
        texture = rng.normal(0, 12, (h, w, 3))
        pixels = np.clip(np.asarray(coarse, dtype=np.float64) + texture, 0, 255).astype(np.uint8)
        (base / "images" / relative).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(base / "images" / relative, quality=90)
        images.append(f"{i + 1} {relative}")
        labels.append(f"{i + 1} {c}")
    (base / "images.txt").write_text("\n".join(images) + "\n")
    (base / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    recipe = {
        "scale": (0.16, 1.0),
        "ratio": (3 / 4, 4 / 3),
        "jitter": (0.25, 0.25, 0.25, 0.0),
    }  # Boudiaf, CUB

    # --- ours: decode once, then batches from the memmap, views on the device
    dm = ImageDataModule(
        "bench",
        lambda: read_cub200(root, expected_sizes=None),
        [3, 224, 224],
        classes,
        batch_size=batch_size,
        resize="shorter:256",
        validation="none",
        decode_workers=2,
        cache_dir=str(root / "cache"),
        progress=False,
        augment=Augment(
            crop_scale=list(recipe["scale"]), crop_ratio=list(recipe["ratio"]), jitter=list(recipe["jitter"])
        ),
    )
    start = time.perf_counter()
    dm.load()
    build_s = time.perf_counter() - start
    dm.trainer = SimpleNamespace(training=True, global_rank=0, world_size=1)

    def ours() -> int:
        seen = 0
        for batch in dm.train_dataloader():
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            seen += len(dm.on_after_batch_transfer(batch, 0)["inputs"])
        cuda_sync()
        return seen

    # --- the baseline: decode + resize + per-sample transforms in 2 DataLoader workers
    paths = [base / "images" / line.split()[1] for line in images[:n]]
    transform = T.Compose(
        [
            T.Resize(256),
            T.ColorJitter(*recipe["jitter"]),
            T.RandomResizedCrop(224, scale=recipe["scale"], ratio=recipe["ratio"]),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
        ]
    )

    class Folder(Dataset):
        def __len__(self) -> int:
            return n

        def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
            return transform(Image.open(paths[i]).convert("RGB")), i % classes

    loader = DataLoader(
        Folder(),
        batch_size=batch_size,
        shuffle=True,
        num_workers=2,
        drop_last=True,
        persistent_workers=True,
        pin_memory=device.type == "cuda",
    )

    def baseline() -> int:
        seen = 0
        for x, _ in loader:
            seen += len(x.to(device, non_blocking=True))
        cuda_sync()
        return seen

    rates = {}
    for name, epoch in (("ours", ours), ("baseline", baseline)):
        seen = epoch()  # warm-up: worker start, page cache, CUDA kernels; every epoch yields as many images
        rates[name] = seen / best_of(epoch)
    return {
        "image_pipeline_ratio": rates["ours"] / rates["baseline"],
        "image_pipeline_ours_img_s": rates["ours"],
        "image_pipeline_baseline_img_s": rates["baseline"],
        "image_pipeline_cache_build_s": build_s,
        "image_pipeline_device": str(device),
        "image_pipeline_torch_threads": torch.get_num_threads(),
    }
