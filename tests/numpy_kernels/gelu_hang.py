"""Never returns on its second correctness case."""
import time


def solve(dev, x, y, n):
    if n == 31:
        time.sleep(3600)
