"""PM editing of a rubric's draft version: item edits, the diff against the published version, publishing."""
