"""Command-line entry point (placeholder, filled in below)."""
def main() -> None:
    print("ds4tui")
