"""The project roster: members (guardian permissions plus their history) and invitation links."""
