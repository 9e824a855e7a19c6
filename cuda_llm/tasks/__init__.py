"""Tasks: what to compute, the NumPy reference, the test shapes and the naive baseline. Data only.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths.
"""

from cuda_llm.tasks.loader import LoadedTask, TaskError, list_task_names, load_all, load_task, load_task_folder
from cuda_llm.tasks.model import DType, Param, Task, Tolerance

__all__ = [
    "DType", "LoadedTask", "Param", "Task", "TaskError", "Tolerance",
    "list_task_names", "load_all", "load_task", "load_task_folder",
]
