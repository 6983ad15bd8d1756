"""A page's words, wherever they came from (a PDF's text layer or the OCR engine), turned into a document.

Pure Python over boxes, so that it runs and is tested without the ``ocr``
extra. ``model`` holds the vocabulary every step shares: words in, a
``PageLayout`` of blocks in reading order out, with the page's furniture
(running headers and footers, page numbers, banners) kept apart.

``document.read_document(pages)`` is the way in: each page through
``page.read_layout`` (tables found, words into ``lines``, a ``skew`` undone,
``order`` cut into regions, ``blocks`` made of their lines), then the
furniture lifted over the whole document; a ``DocumentLayout`` gives its
text, olmocr-style page spans and ``markdown``.
"""
