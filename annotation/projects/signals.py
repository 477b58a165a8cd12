"""Signals other apps listen to; annotation never imports them.

`project_cloned(sender=Project, source=..., clone=..., created_by=...)` is sent inside the
clone's transaction, so a receiver's writes (payments copies the prices) commit or roll
back with the clone.
"""
from django.dispatch import Signal

project_cloned = Signal()
