"""Feedback: citable answers, the UBI-shaped logs of what was shown and used."""
