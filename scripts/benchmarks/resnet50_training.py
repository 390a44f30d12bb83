"""ResNet-50 training images/s through the framework on a CUDA GPU (bf16-mixed, channels-last, batch 256;
skipped without CUDA). Goal: >= 2,500 on one H100."""

from __future__ import annotations

import time

import torch

from .common import cuda_sync


class _StepTimer:
    """Seconds of the training steps after the first ``skip`` (cudnn autotuning, allocator warm-up)."""

    def __new__(cls, skip: int):
        import lightning as L

        class Timer(L.Callback):
            def __init__(self) -> None:
                self.count, self.steps, self.seconds, self.start = 0, 0, 0.0, None

            def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
                if self.count == skip:
                    cuda_sync()
                    self.start = time.perf_counter()

            def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
                self.count += 1
                if self.start is not None:
                    self.steps += 1

            def on_train_epoch_end(self, trainer, module) -> None:
                cuda_sync()
                self.seconds = time.perf_counter() - self.start

        return Timer()


def measure(batch: int = 256, steps: int = 40, side: int = 224, accelerator: str = "gpu") -> dict:
    """ResNet-50 training images per second through the framework on a CUDA GPU: ImageDataModule (fake source,
    in memory, 256 x 256 canvases), per-image augmentation on the GPU, the Boudiaf CE head, SGD, warmcos,
    bf16-mixed and channels-last, batch 256; images per second over the steps after a warm-up epoch. Reported
    with fp32 / no channels-last for comparison. Goal (issue): >= 2,500 img/s on one H100-class GPU.
    Skipped (reported as such) without CUDA."""
    if accelerator == "gpu" and not torch.cuda.is_available():
        return {"resnet50_training": "skipped: no CUDA device"}
    import functools

    import lightning as L

    from clusterable.data.folders import ImageDataModule
    from clusterable.data.folders.augment import Augment
    from clusterable.heads.ce import CrossEntropy
    from clusterable.models.backbones import ResNet50
    from clusterable.module import RepresentationModule
    from clusterable.schedules import warmcos

    torch.backends.cudnn.benchmark = True
    out: dict = {"resnet50_device": torch.cuda.get_device_name() if accelerator == "gpu" else "cpu"}
    for precision, channels_last in (("bf16-mixed", True), ("bf16-mixed", False), ("32-true", False)):
        dm = ImageDataModule(
            "bench",
            None,
            [3, side, side],
            num_classes=100,
            batch_size=batch,
            source="fake",
            fake_size=batch * steps,
            seed=0,
            validation="none",
            augment=Augment(jitter=[0.25, 0.25, 0.25, 0.0]),
        )
        encoder = ResNet50(input_shape=(3, side, side), weights=None)
        head = CrossEntropy(num_classes=100, embedding_dim=encoder.embedding_dim)
        opt = functools.partial(torch.optim.SGD, lr=0.02, momentum=0.9, weight_decay=5e-4)
        module = RepresentationModule(
            encoder,
            head,
            opt,
            scheduler=functools.partial(warmcos, warmup_steps=100),
            weight_decay_on="matrices",
            channels_last=channels_last,
            class_disjoint=True,
        )
        timer = _StepTimer(skip=5)
        trainer = L.Trainer(
            max_epochs=1,
            accelerator=accelerator,
            devices=1,
            precision=precision,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            callbacks=[timer],
        )
        trainer.fit(module, datamodule=dm)
        key = f"resnet50_img_per_s/{precision}{'/channels_last' if channels_last else ''}"
        out[key] = round(batch * timer.steps / timer.seconds, 1)
    return out
