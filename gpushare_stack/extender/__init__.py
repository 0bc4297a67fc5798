"""Scheduler extender for multi-GPU sharing (filter, prioritize, bind, inspect)."""
