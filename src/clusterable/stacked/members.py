"""M single-run modules of one architecture held as one stacked model: parameters and buffers (M, ...).

The members are the ``RepresentationModule``s their single runs build (each after ``seed_everything`` with its
own seed), so a member starts from its single run's parameters bit for bit. Training calls the first member's
module as a template under ``torch.func.vmap`` over the member axis (``functional_call`` with each member's
slice of the stacked tensors), so every layer of every encoder and head is stacked without a stacked copy of its
code: a Linear layer becomes a batched matmul, a convolution a grouped one. The scalars a head declares
(``contracts.StacksScalars``: COREL's λ) are set, per member, as 0-d slices of an (M,) tensor for the call.

Nothing mixes members: each member's loss is its own mean, the objective is their sum (so each member's gradient
is its single-run gradient), and batched matmuls and elementwise ops never reduce over the member axis.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from clusterable.contracts import EncodingHead, HasConstantBuffers, StacksScalars
from clusterable.stacked.errors import NotStackable


class _Call(nn.Module):
    """What ``vmap`` calls on the template module: a training step's loss parts, or validation's outputs."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, batch: dict[str, Tensor], epoch: int, train: bool) -> dict[str, Tensor]:
        if train:
            return self.module.loss_parts(batch, epoch=epoch)
        return self.module.validation_outputs(batch, epoch=epoch)


class StackedMembers:
    """The stacked parameters, buffers and scalars of ``modules`` (M >= 1 ``RepresentationModule``s).

    Args:
        modules: the members' modules, built as their single runs build them; ``modules[0]`` is the template.

    Attributes:
        params: name -> (M, ...) trainable parameters (leaves with ``requires_grad``).
        buffers: name -> (M, ...) buffers; the constant ones a module declares (``HasConstantBuffers``: a text
            encoder's word vectors) are shared, not stacked.
        scalars: name -> (M,) the head's declared scalars.
    """

    def __init__(self, modules: Sequence[nn.Module]):
        if not modules:
            raise ValueError("a stack needs at least one member")
        self.modules = list(modules)
        self.template = _Call(self.modules[0])
        head = self.modules[0].head
        if isinstance(head, EncodingHead):
            raise NotStackable(f"{type(head).__name__} embeds its batches its own way (EncodingHead)")
        kinds = {type(m.head) for m in self.modules} | {type(m.encoder) for m in self.modules}
        if len(kinds) != 2:
            raise NotStackable("the members' encoders or heads are of different classes")
        self.scalar_names = tuple(head.stacked_scalars) if isinstance(head, StacksScalars) else ()
        self.shared_buffers = {
            f"module.{prefix}.{name}" if prefix else f"module.{name}"
            for prefix, sub in self.modules[0].named_modules()
            if isinstance(sub, HasConstantBuffers)
            for name in sub.ddp_constant_buffers
        }
        self.params: dict[str, Tensor] = {}
        self.buffers: dict[str, Tensor] = {}
        self.restack()
        self.scalars = {
            name: torch.tensor(
                [float(getattr(m.head, name)) for m in self.modules], dtype=self.dtype, device=self.device
            )
            for name in self.scalar_names
        }
        self._check_scalars()

    @property
    def size(self) -> int:
        return len(self.modules)

    @property
    def dtype(self) -> torch.dtype:
        return next(iter(self.params.values())).dtype if self.params else torch.get_default_dtype()

    @property
    def device(self) -> torch.device:
        return next(iter(self.params.values())).device if self.params else torch.device("cpu")

    def _check_scalars(self) -> None:
        """Members may differ only in what is stacked: parameters, buffers and the declared scalars. A head
        attribute that is a number and differs between members (a λ the head does not declare) is refused."""
        for name, value in vars(self.modules[0].head).items():
            if name.startswith("_") or name in self.scalar_names or not isinstance(value, int | float | str):
                continue
            if any(vars(m.head).get(name) != value for m in self.modules[1:]):
                raise NotStackable(
                    f"the members' heads differ in {name}, which {type(self.modules[0].head).__name__} does not stack"
                )

    def restack(self, buffers_only: bool = False) -> None:
        """(Re)build the stacked tensors from the members' modules (after their cluster state changed)."""
        named = [dict(_Call(m).named_parameters()) for m in self.modules]
        if not buffers_only:
            self.params = {
                name: torch.stack([n[name].detach() for n in named]).requires_grad_(True)
                for name, p in named[0].items()
                if p.requires_grad
            }
        bufs = [dict(_Call(m).named_buffers()) for m in self.modules]
        self.buffers = {
            name: b if name in self.shared_buffers else torch.stack([x[name] for x in bufs])
            for name, b in bufs[0].items()
        }

    def member_parameters(self) -> list[dict[str, Tensor]]:
        """Per member, its own module's parameters under the stacked names (what its optimizer holds)."""
        return [dict(_Call(m).named_parameters()) for m in self.modules]

    def unstack_into(
        self, index: int, params: dict[str, Tensor] | None = None, buffers: dict[str, Tensor] | None = None
    ) -> nn.Module:
        """Copy member ``index``'s slice of ``params``/``buffers`` (default: the current ones) into its own
        module and return it: a single-run module with the member's weights (checkpoints, evaluation, Lloyd)."""
        params = self.params if params is None else params
        buffers = self.buffers if buffers is None else buffers
        module = self.modules[index]
        own = _Call(module)
        with torch.no_grad():
            for name, p in own.named_parameters():
                if name in params:
                    p.copy_(params[name][index])
            for name, b in list(own.named_buffers()):
                if name in buffers and name not in self.shared_buffers:
                    value = buffers[name][index]
                    if b.shape != value.shape:  # a cluster state sized when it was first set
                        _set_buffer(own, name, value.clone())
                    else:
                        b.copy_(value)
        return module

    @contextlib.contextmanager
    def _scalars_set(self, values: dict[str, Tensor]) -> Iterator[None]:
        head = self.modules[0].head
        saved = {name: getattr(head, name) for name in values}
        try:
            for name, value in values.items():
                setattr(head, name, value)
            yield
        finally:
            for name, value in saved.items():
                setattr(head, name, value)

    # vmap's randomness="different": each member draws its own dropout masks (they match its single run's in
    # distribution only).
    def _vmapped(
        self,
        batch: dict[str, Tensor],
        shared: set[str],
        epoch: int,
        train: bool,
        params: dict | None = None,
        buffers: dict | None = None,
    ) -> dict[str, Tensor]:
        """``template(batch)`` for every member: batch tensors (M, B, ...) except the ``shared`` keys (B, ...);
        with the stacked ``params`` and ``buffers`` given (default: the stack's own)."""
        shared_buffers = {k: v for k, v in self.buffers.items() if k in self.shared_buffers}
        stacked_buffers = self.stacked_buffers() if buffers is None else buffers

        def one(params: dict, buffers: dict, scalars: dict, member_batch: dict, common: dict) -> dict:
            with self._scalars_set(scalars):
                return functional_call(
                    self.template,
                    {**params, **buffers, **shared_buffers},
                    (member_batch | common, epoch, train),
                )

        stacked = {k: v for k, v in batch.items() if k not in shared}
        common = {k: v for k, v in batch.items() if k in shared}
        return vmap(one, in_dims=(0, 0, 0, 0, None), randomness="different")(
            self.params if params is None else params, stacked_buffers, self.scalars, stacked, common
        )

    def stacked_buffers(self) -> dict[str, Tensor]:
        """The buffers with a member axis (M, ...): all but the constant ones the members share."""
        return {k: v for k, v in self.buffers.items() if k not in self.shared_buffers}

    def losses(
        self,
        batch: dict[str, Tensor],
        epoch: int,
        shared: set[str] = frozenset(),
        params: dict | None = None,
        buffers: dict | None = None,
    ) -> dict[str, Tensor]:
        """Each member's loss parts (M,) on its own batch (training mode), at the stacked ``params`` and
        ``buffers`` (name -> (M, ...); default the stack's own: a compiled step passes what ``torch.func.grad``
        differentiates, and copies of the buffers a head may update in place)."""
        self.modules[0].train()
        return self._vmapped(batch, set(shared), epoch, train=True, params=params, buffers=buffers)

    @torch.no_grad()
    def validation_outputs(self, batch: dict[str, Tensor], epoch: int, shared: set[str] = frozenset()) -> dict:
        """Evaluation-mode outputs per member, as the single run's ``validation_step`` computes them:
        ``encoder_output`` (M, B, D), the ``logits`` (M, B, K) of a classifying head and the ``loss`` (M,) of a
        head whose loss is defined on new points."""
        was = self.modules[0].training
        self.modules[0].eval()
        try:
            return self._vmapped(batch, set(shared), epoch, train=False)
        finally:
            self.modules[0].train(was)


def _set_buffer(module: nn.Module, dotted: str, value: Tensor) -> None:
    owner_name, _, name = dotted.rpartition(".")
    owner = module.get_submodule(owner_name) if owner_name else module
    setattr(owner, name, value)
