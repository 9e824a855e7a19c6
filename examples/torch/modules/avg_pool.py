import torch
import torch.nn as nn


class Model(nn.Module):
    """2x2 average pooling with stride 2 over an NCHW tensor."""

    def __init__(self, window: int):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=window, stride=window)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


n = 16
channels = 64
size = 128
window = 2


def get_inputs():
    return [torch.randn(n, channels, size, size)]


def get_init_inputs():
    return [window]
