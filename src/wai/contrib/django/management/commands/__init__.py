"""``wai_worker`` and ``wai_migrate``."""
