"""A judged set of our own for the broker: help-center articles, support tickets and
wiki pages (three ``static`` sources), and twelve questions an agent asks, each with
its relevant rows graded 2 (answers it) or 1 (related). Written by hand for these
tests; the rows ``SUPPORT_ROWS`` name hold the word "support" (as "Supported" or
"support") without being about most questions."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any


def _rows(prefix: str, items: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}-{i + 1:02d}", "title": title, "body": body}
        for i, (title, body) in enumerate(items)
    ]


ARTICLES = _rows(
    "KB",
    [
        ("Reset your password", "Use the forgot password link on the sign-in page."),
        ("Turn on two-factor authentication", "Add an authenticator app under security."),
        ("Request a refund", "Refunds for duplicate charges are issued within 5 days."),
        ("Export your data", "Download every record as a CSV file from settings."),
        ("API rate limits", "Clients get 429 Too Many Requests past 100 calls a minute."),
        ("Set up single sign-on", "Connect Okta or Azure AD with SAML for single sign-on."),
        ("Supported browsers and devices", "Supported: Chrome, Firefox, Safari, iOS, Android."),
        ("Contact support", "Our support team answers by chat and email."),
        ("Manage email notifications", "Turn notification emails off per project."),
        ("Delete your account", "Deleting an account removes all data permanently."),
        ("Password requirements", "At least 12 characters, one of them a digit."),
        ("Billing overview", "Invoices, charges and payment methods in one place."),
        ("Mobile apps", "Install the app from the App Store or Google Play."),
        ("Admin console", "Where an admin manages the workspace."),
        ("Webhooks", "Send events to your own endpoint."),
    ],
)
TICKETS = _rows(
    "TK",
    [
        ("Password reset link expired", "The reset email link says expired after an hour."),
        ("Charged twice this month", "Duplicate charge on the card, asking for a refund."),
        ("Mobile app crashes on launch", "The iOS app closes right after the splash screen."),
        ("Webhook deliveries failing", "Our endpoint gets no webhook events since Monday."),
        ("Okta single sign-on error", "SAML assertion rejected when signing in with Okta."),
        ("Too many requests from the API", "Our integration hits the 429 rate limit."),
        ("Cannot change user role", "Admin role option is greyed out for a member."),
        ("Support chat not loading", "The support widget spins forever on our browser."),
        ("CSV export is empty", "Exported CSV file has headers but no rows."),
        ("Unsubscribe from notifications", "Still getting notification emails after opt-out."),
        ("Authenticator app lost", "New phone, lost my authenticator codes."),
        ("Okta users not provisioned", "New hires missing after the Okta sync."),
        ("Data export for an audit", "We need a copy of all data for our auditors."),
        ("Too many emails", "The daily digest emails are too frequent."),
        ("Account closed by mistake", "Please restore the account we deleted."),
    ],
)
WIKI = _rows(
    "WK",
    [
        ("How sign-in and password hashing work", "Passwords are hashed; reset tokens last 1h."),
        ("Two-factor authentication design", "TOTP codes from an authenticator app."),
        ("Billing and refunds runbook", "Refund duplicate charges from the billing console."),
        ("Webhook delivery retries", "Failed webhook deliveries retry with backoff."),
        ("Roles and permissions", "Owner, admin and member roles; only owners change roles."),
        ("Mobile release checklist", "Crash reports for the iOS and Android apps."),
        ("Rate limiter internals", "A token bucket per API key: 100 requests a minute."),
        ("Support rotation", "Who is on support duty each week."),
        ("Account deletion pipeline", "Deletion requests purge data after 30 days."),
        ("SSO with SAML", "Okta and Azure AD as SAML identity providers."),
        ("API gateway", "Requests pass the gateway before the rate limiter."),
        ("Email service", "Notification emails go through the mail queue."),
        ("Browser testing matrix", "Chrome, Firefox and Safari run in CI."),
        ("Launch crash triage", "Symbolicate the crash log first."),
        ("Refund policy", "Refunds within 30 days of a charge."),
    ],
)

#: question → {row id: grade}
QUESTIONS: dict[str, dict[str, int]] = {
    "how do I reset my password": {"KB-01": 2, "TK-01": 2, "WK-01": 1, "KB-11": 1},
    "set up two-factor authentication": {"KB-02": 2, "WK-02": 1, "TK-11": 1},
    "refund for a duplicate charge": {"KB-03": 2, "TK-02": 2, "WK-03": 1, "WK-15": 1, "KB-12": 1},
    "export my data to csv": {"KB-04": 2, "TK-09": 1, "TK-13": 1},
    "api rate limit 429 too many requests": {"KB-05": 2, "TK-06": 2, "WK-07": 1, "WK-11": 1},
    "single sign-on with okta": {"KB-06": 2, "TK-05": 2, "WK-10": 1, "TK-12": 1},
    "mobile app crashes on launch": {"TK-03": 2, "WK-06": 1, "WK-14": 1, "KB-13": 1},
    "turn off notification emails": {"KB-09": 2, "TK-10": 2, "TK-14": 1, "WK-12": 1},
    "delete my account permanently": {"KB-10": 2, "WK-09": 1, "TK-15": 1},
    "webhook deliveries failing": {"TK-04": 2, "WK-04": 1, "KB-15": 1},
    "change a user's role to admin": {"TK-07": 2, "WK-05": 2, "KB-14": 1},
    "which browsers can I use": {"KB-07": 2, "WK-13": 1},
}
#: Rows holding the word "support" ("Supported", "support") that answer at most one question.
SUPPORT_ROWS = frozenset({"KB-07", "KB-08", "TK-08", "WK-08"})


def ndcg_at_10(read: Iterable[Any], grades: Mapping[str, int]) -> float:
    """nDCG@10 of the ids in reading order (gain 2^grade - 1, log2 discount)."""
    gains = [2 ** grades.get(str(i), 0) - 1 for i in list(read)[:10]]
    ideal = sorted((2**g - 1 for g in grades.values()), reverse=True)[:10]
    dcg = sum(g / math.log2(k + 2) for k, g in enumerate(gains))
    best = sum(g / math.log2(k + 2) for k, g in enumerate(ideal))
    return dcg / best if best else 0.0


def mean(values: Iterable[float]) -> float:
    chosen = list(values)
    return sum(chosen) / len(chosen)
