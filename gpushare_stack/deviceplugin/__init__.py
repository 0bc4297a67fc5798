"""Device plugin for multi-GPU sharing: advertises GiB and cards, answers Allocate."""
