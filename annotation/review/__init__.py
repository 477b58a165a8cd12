"""The PM's review of submissions (flags, returns, rejections) and the reminders and risk alerts."""
