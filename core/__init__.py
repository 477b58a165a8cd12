"""What every app shares and no app owns. Imports Django and the standard library only."""
