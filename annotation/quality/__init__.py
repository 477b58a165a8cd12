"""Expert quality: silent control tasks, capability portraits, tier standing, quality settings,
and the PM's quality pages."""
