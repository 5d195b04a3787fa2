"""ds4tui's widgets: the pixel map, category list, turn list, entry inspector, header."""
