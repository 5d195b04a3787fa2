"""User actions (steering) as a controller the app calls."""
