import torch
import torch.nn as nn


class Model(nn.Module):
    """Swish with a fixed slope: x * sigmoid(beta * x), elementwise."""

    def __init__(self, beta: float):
        super().__init__()
        self.beta = beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.beta * x)


batch_size = 256
features = 16384
beta = 1.5


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [beta]
