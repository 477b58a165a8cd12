"""Agreement statistics (numpy only, no Django import)."""
