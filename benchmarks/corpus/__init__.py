"""The benchmark crawl: about 1 GB of gzip WARC files shaped like Common Crawl's, built offline from real text.

`make corpus` (`python -m benchmarks.corpus`) writes under `.bench/corpus/` (never committed):

    manifest.json   seed, options, rates, each source package (name, version, .deb sha256, licence), the page-size
                    model and the sizes it produced, every file (path, bytes, sha256, records by kind), counts, and
                    one sha256 over all of it: the same seed and the same packages give the same bytes
    gold.parquet    one row per HTML page with text: crawl, file, WARC-Record-ID, URL, the text put into the page
                    (the gold of an extraction check), its language and script, its source, what was planted
                    (exact or near copy of which page and at what measured Jaccard, boilerplate page), the charset
                    it was written in and where it was declared, truncated / oversized / damaged
    crawls/<crawl>/<crawl>-<n>.warc.gz   two crawls, BENCH-2026-A and BENCH-2026-B

Where the bytes come from:
- **Text**: Debian 12's documentation packages (`llm_assets_support/debian_docs.py`), fetched with
  `apt-get download` into `.bench/corpus/debs/` and unpacked there: LibreOffice's help in 34 languages (MPL-2.0),
  the Debian Administrator's Handbook in 26 (GPL-2.0+ or CC-BY-SA-3.0), Python's documentation in English (PSF-2.0).
  Latin, Cyrillic, Greek, Arabic, Devanagari, Han (simplified and traditional), Japanese, Hangul, Khmer and Tibetan.
- **Pages**: every 200 HTML response of `../shared/data/warc` cut into a template around its main content
  (`templates.py`: its navigation, sidebars, footers, scripts and styles kept), retitled and relabelled with the
  text's language; the text goes in as headings, paragraphs and lists, sometimes followed by a comment thread of
  other texts' paragraphs (not gold). Each page's size is drawn from a log-normal fitted to the HTML responses of
  the shared Common Crawl WARC (CC-MAIN-2020-34), reached with boilerplate fragments of the real pages.
- **Records** (`warc.py`): gzip per record; warcinfo, then request, response and metadata per capture; revisits;
  redirects, 404s and 5xx; PNG images (from the packages) and PDFs; legacy charsets (windows-1251, Shift_JIS,
  GB18030, Big5, EUC-KR, ISO-8859-x, ...) declared in the header, the `<meta>`, both or neither, a few declared wrong
  or with an unknown label; pages padded past 5 MB, half kept whole and half cut at 1 MiB with `WARC-Truncated`
  as Common Crawl does; gzip members cut short. Rates: `build.Rates`, recorded in the manifest.
- **Copies**: exact copies and near copies (words replaced at scattered places to a Jaccard of word 5-grams
  between 0.70 and 0.98, measured and recorded) of pages of the same crawl or of the other one, and boilerplate
  pages sharing a few short texts.
"""
