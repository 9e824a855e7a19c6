"""Honest gelu except on every 2th call at an unchanged n: the previous call's output (gelu_replay.py)."""
from gelu_replay import Replay

solve = Replay(2)
