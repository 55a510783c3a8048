"""Credentials in an HTTP source's URL and headers are masked wherever shown."""

from __future__ import annotations

import logging

import pytest

from nautilus_ranking.sources.http.secrets import MaskUrls, mask_url, scrub, url_secrets


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("https://u:p4ss@es:9200/kb/_search", "https://u:***@es:9200/kb/_search"),
        ("https://u@es:9200/", "https://u@es:9200/"),
        (
            "http://ts:8108/x?x-typesense-api-key=abc&q=1",
            "http://ts:8108/x?x-typesense-api-key=***&q=1",
        ),
        (
            "http://h/x?token=t&sig=s&Signature=z&page=2",
            "http://h/x?token=***&sig=***&Signature=***&page=2",
        ),
        (
            "http://h/x?password=a&client_secret=b&auth=c",
            "http://h/x?password=***&client_secret=***&auth=***",
        ),
        ("http://a:b/c@h/x#frag", "http://a:***@h/x#frag"),
        ("http://h/x?q=disk", "http://h/x?q=disk"),
    ],
)
def test_url_credentials_are_masked(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_the_secrets_of_a_url_are_scrubbed_from_any_text() -> None:
    url = "https://ops:hunter2hunter@es/kb?api_key=k3y-value-1&q=1"
    assert url_secrets(url) == ["hunter2hunter", "k3y-value-1"]
    text = f"failed: {url} (api_key=k3y-value-1, user ops)"
    assert (
        scrub(text, url_secrets(url))
        == "failed: https://ops:***@es/kb?api_key=***&q=1 (api_key=***, user ops)"
    )


def test_library_logs_have_their_urls_masked() -> None:
    record = logging.LogRecord(
        "httpx",
        logging.INFO,
        __file__,
        1,
        'HTTP Request: %s %s "%s"',
        ("GET", "http://h/s?x-typesense-api-key=abc123&q=1", "HTTP/1.1 200 OK"),
        None,
    )
    assert MaskUrls().filter(record)
    assert record.getMessage() == (
        'HTTP Request: GET http://h/s?x-typesense-api-key=***&q=1 "HTTP/1.1 200 OK"'
    )
