"""The app's storage: the database engine and its tables (SQLite in DATA_DIR, or
PostgreSQL through DATABASE_URL), shared by the quiz and the demo runtime."""
