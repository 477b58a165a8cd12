"""Project setup: creating and editing a project's settings, its lifecycle, and cloning it."""
