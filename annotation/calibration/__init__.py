"""Expert quality: golden set, calibration, silent control tasks, portraits and tier standing."""
