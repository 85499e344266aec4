"""The management commands of :mod:`wai.contrib.django`."""
