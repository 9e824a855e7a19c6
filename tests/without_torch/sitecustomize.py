"""Put this folder first on PYTHONPATH to run Python as on a machine without PyTorch: `import torch` fails the
way a missing package does (ImportError), so the suite can be checked for skipping, not failing, there:
`PYTHONPATH=tests/without_torch:. python -m pytest -q tests/test_torch_pure.py`."""

import sys

sys.modules["torch"] = None   # type: ignore[assignment]
