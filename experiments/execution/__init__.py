"""The executor: Celery tasks, dispatch, node holding, the node agent and the run's supervision
(Django and Celery; the tools themselves come from the ``runners`` kit)."""
