"""archscout layer 2: study specs, Optuna search, reports, exports and the command line."""
