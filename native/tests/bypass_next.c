/* Loaded after bypass_helper: RTLD_NEXT from the helper must land here. */
__attribute__((visibility("default"))) int gpushare_order_probe(void) { return 2; }
