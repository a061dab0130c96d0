"""archscout layer 0: the analytic hardware cost model (numpy + pydantic only)."""
