"""Screens of the app: the dashboard and its modals."""
