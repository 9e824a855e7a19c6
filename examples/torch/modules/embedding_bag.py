import torch
import torch.nn as nn


class Model(nn.Module):
    """An embedding-bag lookup: each row of int64 indices (torch.long) picks rows of a learned table, which
    are averaged. get_inputs() draws the indices below num_embeddings, at whatever sizes it is called with."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.emb = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return self.emb(indices).mean(dim=1)


batch_size = 4096
bag_size = 16
num_embeddings = 50000
embedding_dim = 128


def get_inputs():
    return [torch.randint(0, num_embeddings, (batch_size, bag_size))]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
