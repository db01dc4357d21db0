"""The collapse detector on its own: which documents of a unit it marks as collapsed, and when it gives them back.
The texts here are plain strings: the detector sees nothing else of a page (test_documents runs it on real pages)."""

from __future__ import annotations

from llm_assets.core.collapse import Collapse, CollapseWindow

SIDEBAR = "Home | Shop | Cart | Contact | Terms and conditions | Shipping | Returns | About us | Newsletter | FAQ"


def text(n: int) -> str:
    return f"Product {n}: a page of its own, long enough to count, with words that no other page here has. " * 2


def run(window: CollapseWindow[str], pages: list[tuple[str, str, str | None]]) -> list[tuple[str, bool]]:
    """Every page through the window, named by its URL: what it gives back, in order."""
    out = []
    for url, host, body in pages:
        out += window.add(url, host, url, body, html_chars=1_000)
    return out + window.flush()


def collapsed(out: list[tuple[str, bool]]) -> list[str]:
    return [url for url, is_collapsed in out if is_collapsed]


def test_a_group_of_min_pages_distinct_urls_collapses_earlier_pages_and_later_ones_too():
    pages = [("/a", "shop", SIDEBAR), ("/1", "shop", text(1)), ("/b", "shop", SIDEBAR), ("/2", "shop", text(2)),
             ("/c", "shop", SIDEBAR), ("/3", "shop", text(3)), ("/d", "shop", SIDEBAR)]
    out = run(CollapseWindow(Collapse(min_pages=3)), pages)
    assert [url for url, _ in out] == [url for url, _, _ in pages]  # every page once, in order
    assert collapsed(out) == ["/a", "/b", "/c", "/d"]


def test_below_min_pages_nothing_collapses():
    out = run(CollapseWindow(Collapse(min_pages=3)), [("/a", "shop", SIDEBAR), ("/b", "shop", SIDEBAR)])
    assert collapsed(out) == []


def test_the_same_url_again_is_not_another_page():
    pages = [("/a", "shop", SIDEBAR), ("/a", "shop", SIDEBAR), ("/b", "shop", SIDEBAR)]
    assert collapsed(run(CollapseWindow(Collapse(min_pages=3)), pages)) == []
    assert collapsed(run(CollapseWindow(Collapse(min_pages=2)), pages)) == ["/a", "/a", "/b"]


def test_groups_are_per_host():
    pages = [("/a", "one", SIDEBAR), ("/b", "two", SIDEBAR), ("/c", "three", SIDEBAR), ("/d", "", SIDEBAR)]
    assert collapsed(run(CollapseWindow(Collapse(min_pages=2)), pages)) == []


def test_short_identical_texts_are_not_a_collapse():
    not_found = "404 Not Found"
    pages = [(f"/{n}", "shop", not_found) for n in range(10)]
    assert collapsed(run(CollapseWindow(Collapse()), pages)) == []
    assert len(collapsed(run(CollapseWindow(Collapse(min_chars=len(not_found))), pages))) == 10


def test_documents_without_extracted_text_pass_in_order_and_never_collapse():
    pages = [("/a", "shop", SIDEBAR), ("wet-1", "shop", None), ("/b", "shop", SIDEBAR), ("wet-2", "shop", None),
             ("/c", "shop", SIDEBAR)]
    out = run(CollapseWindow(Collapse(min_pages=3)), pages)
    assert out == [("/a", True), ("wet-1", False), ("/b", True), ("wet-2", False), ("/c", True)]


def test_pages_that_left_the_window_before_the_collapse_are_given_back_as_they_were():
    """A window of 2 documents: the group's first page leaves before its third arrives; the second is still held."""
    window: CollapseWindow[str] = CollapseWindow(Collapse(min_pages=3, window_pages=2))
    assert window.add("/a", "shop", "/a", SIDEBAR) == []
    assert window.add("/1", "shop", "/1", text(1)) == []
    assert window.add("/b", "shop", "/b", SIDEBAR) == [("/a", False)]
    assert window.add("/c", "shop", "/c", SIDEBAR) == [("/1", False)]  # the collapse: /b and /c held, marked
    assert window.add("/2", "shop", "/2", text(2)) == [("/b", True)]
    assert window.add("/d", "shop", "/d", SIDEBAR) == [("/c", True)]
    assert window.flush() == [("/2", False), ("/d", True)]
    assert window.flush() == []


def test_held_html_is_bounded_by_window_chars():
    window: CollapseWindow[str] = CollapseWindow(Collapse(window_pages=100, window_chars=2_500))
    assert window.add("/a", "shop", "/a", SIDEBAR, html_chars=1_000) == []
    assert window.add("/b", "shop", "/b", SIDEBAR, html_chars=1_000) == []
    assert window.add("/c", "shop", "/c", SIDEBAR, html_chars=1_000) == [("/a", True)]
    assert window.add("/d", "shop", "/d", SIDEBAR, html_chars=5_000) == [("/b", True), ("/c", True), ("/d", True)]


def test_off_gives_every_document_back_at_once_unmarked():
    window: CollapseWindow[str] = CollapseWindow(Collapse(enabled=False, min_pages=2))
    assert [window.add(url, "shop", url, SIDEBAR) for url in ("/a", "/b", "/c")] == \
        [[("/a", False)], [("/b", False)], [("/c", False)]]
    assert window.flush() == []


def test_the_outcome_follows_the_pages_alone():
    pages = [(f"/{n}", "shop", SIDEBAR if n % 4 == 0 else text(n)) for n in range(40)]
    settings = Collapse(min_pages=3, window_pages=5)
    assert run(CollapseWindow(settings), pages) == run(CollapseWindow(settings), pages)
    # with pages 4 apart, the third sidebar page (/8) arrives when /0 has left a window of 5: /0 is written as it was
    assert collapsed(run(CollapseWindow(settings), pages)) == [f"/{n}" for n in range(4, 40, 4)]
