"""Expert quality: silent control tasks, capability portraits, tier standing, quality settings, the PM's quality pages."""
