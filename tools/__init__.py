"""Developer tools: checks run by the tests and by hand, never imported by the app."""
