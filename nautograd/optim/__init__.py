"""torch.optim: SGD, Adam, AdamW, LBFGS and the learning-rate schedulers on nautograd tensors."""

from . import lr_scheduler
from .adam import Adam, AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["LBFGS", "Adam", "AdamW", "Optimizer", "SGD", "lr_scheduler"]
