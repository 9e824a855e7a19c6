import torch
import torch.nn as nn


class Model(nn.Module):
    """PReLU with one learned slope per channel: an activation with parameters."""

    def __init__(self, channels: int):
        super().__init__()
        self.act = nn.PReLU(num_parameters=channels, init=0.1)
        with torch.no_grad():
            self.act.weight.uniform_(0.05, 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x)


batch = 32
channels = 128
pixels = 1024


def get_inputs():
    return [torch.randn(batch, channels, pixels)]


def get_init_inputs():
    return [channels]
