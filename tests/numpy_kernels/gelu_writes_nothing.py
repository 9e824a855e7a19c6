"""Returns without writing y."""


def solve(dev, x, y, n):
    return None
