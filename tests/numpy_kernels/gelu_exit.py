"""Ends the process from solve() on its first call (exit code 7)."""
import os


def solve(dev, x, y, n):
    os._exit(7)
