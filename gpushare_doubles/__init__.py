"""Test doubles of the reference stack: the peers' flavors (``flavors/``) and the
deliberate faults (``faults.py``).

They exist to prove the suite, never to run in production, so they live apart from
the shipped stack (``gpushare_stack``), which holds only its own behaviour and the seams
these plug into (``gpushare_stack/variants.py`` finds ``registry.py`` by name). The test
images carry this package beside the stack; the stack imports nothing of it.
"""
