"""The conformance checks, one module per area of the seed; installed as
``gpushare_conformance.conformance`` (``pytest --pyargs gpushare_conformance.conformance``)."""
