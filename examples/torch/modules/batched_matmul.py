import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix product: out[b] = q[b] @ k[b]^T."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.bmm(q, k.transpose(1, 2))


batch = 32
seq = 256
head_dim = 64


def get_inputs():
    return [torch.randn(batch, seq, head_dim), torch.randn(batch, seq, head_dim)]


def get_init_inputs():
    return []
