"""A page's words, wherever they came from (a PDF's text layer or the OCR engine), turned into a document.

Pure Python over boxes, so that it runs and is tested without the ``ocr``
extra. ``model`` holds the vocabulary every step shares: words in, a
``PageLayout`` of blocks in reading order out, with the page's furniture
(running headers and footers, page numbers, banners) kept apart.
"""
