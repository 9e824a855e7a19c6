import torch
import torch.nn as nn


class Model(nn.Module):
    """Fused: a linear layer, GELU (tanh approximation), then a constant scale."""

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(self.fc(x), approximate="tanh") * self.scale


batch_size = 512
in_features = 1024
out_features = 2048
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
