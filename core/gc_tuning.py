"""The garbage collector of a served process: the loaded application set aside, collections less often.

Python's cyclic collector scans, in its oldest generation, every container object the process
holds: once Django, DRF, the apps and their libraries are imported that is several hundred
thousand objects, none of which will ever be garbage, and with the default thresholds
(700, 10, 10) a busy web worker ran such a scan every few requests. Sampled under load, that
time showed up inside whatever allocated at that moment (creating a cursor, building a model
instance) and came to about a fifth of the web's CPU per submission.

`gc_tune()`, called once the application is loaded (config/wsgi.py in gunicorn's master before it
forks the workers, config/celery.py in each worker process), moves everything alive into the
permanent generation (`gc.freeze`, which also keeps the forked workers' copies of those pages
shared) and raises the first threshold, so young objects are collected every 10,000 allocations
instead of every 700. Objects are still freed as soon as nothing refers to them (reference
counting); only cycles wait a little longer for a collection.
"""
import gc

# Allocations (less deallocations) between two collections of the youngest generation, and how
# many collections of one generation make one of the next.
THRESHOLDS = (10_000, 20, 20)


def gc_tune() -> None:
    """Set aside every object alive now from the cyclic collector and collect less often."""
    gc.collect()  # what is garbage already goes now, not into the permanent generation
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
