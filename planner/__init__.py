"""The planner: advice for a real training run, and the code that applies it."""
